complete -c squeue -s A -l account -d 'Comma separated list of accounts to view' -r
complete -c squeue -s j -l jobs -l job -d 'Comma separated list of job ids to view; without a list (Slurm\'s optional j:: argument), every job' -r
complete -c squeue -s M -l clusters -d 'Cluster(s) to query; prints a CLUSTER: line first' -r
complete -c squeue -s n -l name -d 'Comma separated list of job names to view' -r
complete -c squeue -s o -l format -d 'Output format (%.18i %9P …)' -r
complete -c squeue -s O -l Format -d 'Long output format (JobID,Name:30,…)' -r
complete -c squeue -s p -l partition -d 'Comma separated list of partitions to view' -r
complete -c squeue -s q -l qos -d 'Comma separated list of QOS to view' -r
complete -c squeue -s S -l sort -d 'Sort keys (P,t,-p)' -r
complete -c squeue -s s -l steps -d 'Show job steps (optionally only these JOB.STEPs) instead of jobs' -r
complete -c squeue -s t -l states -d 'Comma separated list of states to view (all, PD, running, …)' -r
complete -c squeue -s u -l user -d 'Comma separated list of users to view' -r
complete -c squeue -s w -l nodelist -d 'Only jobs on these nodes' -r
complete -c squeue -s a -l all -d 'Display jobs in hidden partitions too'
complete -c squeue -s r -l array -d 'Display one job array element per line'
complete -c squeue -s h -l noheader -d 'Do not print a header line'
complete -c squeue -s l -l long -d 'Long report (adds STATE and TIME_LIMIT, and a time banner)'
complete -c squeue -l me -d 'Show only jobs of the calling user'
complete -c squeue -l noconvert -d 'Don\'t convert units to their human readable form'
complete -c squeue -l only-job-state -d 'Show only the job id and its compact state'
complete -c squeue -l start -d 'Show the expected start time of pending jobs'
complete -c squeue -s v -l verbose -d 'Verbose output (accepted, no effect)'
complete -c squeue -l json -d 'JSON output (not supported yet)'
complete -c squeue -s V -l version -d 'Print version information'
complete -c squeue -l help -d 'Show this help message'
complete -c squeue -l usage -d 'Display brief usage message'
