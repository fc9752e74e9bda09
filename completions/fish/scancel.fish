complete -c scancel -s A -l account -d 'act only on jobs charging this account' -r
complete -c scancel -s M -l clusters -d 'cluster whose jobs to act on (this one only)' -r
complete -c scancel -l cluster -r
complete -c scancel -s n -l name -d 'act only on jobs with this name' -r
complete -c scancel -l jobname -r
complete -c scancel -s p -l partition -d 'act only on jobs in this partition' -r
complete -c scancel -s q -l qos -d 'act only on jobs with this quality of service' -r
complete -c scancel -s R -l reservation -d 'act only on jobs in this reservation' -r
complete -c scancel -s s -l signal -d 'send this signal (name or number) instead of cancelling' -r
complete -c scancel -s t -l state -d 'act only on jobs in this state (PENDING, RUNNING, SUSPENDED)' -r
complete -c scancel -s u -l user -d 'act only on jobs of this user' -r
complete -c scancel -s w -l nodelist -d 'act only on jobs using these nodes' -r
complete -c scancel -l wckey -d 'act only on jobs with this workload characterization key' -r
complete -c scancel -s b -l batch -d 'signal the batch shell only, not its steps'
complete -c scancel -s f -l full -d 'signal the batch shell and every step'
complete -c scancel -s H -l hurry -d 'accepted for compatibility; no burst buffer to stage out'
complete -c scancel -s Q -l quiet -d 'print no error messages'
complete -c scancel -l me -d 'act only on jobs of the calling user'
complete -c scancel -s v -l verbose -d 'say what is done, and report unknown or ended jobs'
complete -c scancel -s V -l version -d 'print the Slurm version and exit'
complete -c scancel -s h -l help -d 'show this help message'
complete -c scancel -l usage -d 'display a brief usage message'
