complete -c scontrol -s M -l clusters -d 'cluster to act on (this one only)' -r
complete -c scontrol -l cluster -r
complete -c scontrol -s a -l all -d 'accepted: every partition is shown anyway'
complete -c scontrol -s d -l details -d 'more detail in show output'
complete -c scontrol -s h -l help -d 'show this help message'
complete -c scontrol -l json -d 'show output as JSON'
complete -c scontrol -s o -l oneliner -d 'print each record on one line'
complete -c scontrol -s Q -l quiet -d 'print no error messages'
complete -c scontrol -l usage -d 'same as --help'
complete -c scontrol -s v -l verbose -d 'more diagnostics'
complete -c scontrol -s V -l version -d 'print the Slurm version and exit'
