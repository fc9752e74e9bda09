complete -c sacct -s A -l accounts -d 'show only jobs charged to these accounts' -r
complete -c sacct -s M -l clusters -d 'show records of these clusters (all: every one)' -r
complete -c sacct -l cluster -r
complete -c sacct -s E -l endtime -d 'show jobs in any state before this time' -r
complete -c sacct -s o -l format -d 'comma separated fields to print (see --helpformat), each with an optional %width' -r
complete -c sacct -s j -l jobs -d 'show only these comma separated jobs or steps' -r
complete -c sacct -l name -d 'show only jobs with these names' -r
complete -c sacct -s N -l nodelist -d 'show only jobs that ran on these nodes' -r
complete -c sacct -l delimiter -d 'delimiter for --parsable and --parsable2 in place of |' -r
complete -c sacct -s r -l partition -d 'show only jobs in these partitions' -r
complete -c sacct -s q -l qos -d 'show only jobs with these qualities of service' -r
complete -c sacct -s S -l starttime -d 'show jobs in any state after this time (default: midnight)' -r
complete -c sacct -s s -l state -d 'show only jobs in these states (CD, F, R, PD, ...)' -r
complete -c sacct -s u -l user -d 'show only jobs of these users' -r
complete -c sacct -l units -d 'print sizes in this unit' -r
complete -c sacct -s a -l allusers -d 'show jobs of every user, not only your own'
complete -c sacct -s b -l brief -d 'short listing: jobid, state and exit code'
complete -c sacct -s L -l allclusters -d 'show records of every cluster'
complete -c sacct -s D -l duplicates -d 'also show the earlier runs of requeued jobs'
complete -c sacct -s e -l helpformat -d 'list the fields --format accepts'
complete -c sacct -s h -l help -d 'show this help message'
complete -c sacct -s l -l long -d 'long listing: every usage field'
complete -c sacct -s n -l noheader -d 'print no header line'
complete -c sacct -s p -l parsable -d 'fields delimited by \'|\', with a trailing \'|\''
complete -c sacct -s P -l parsable2 -d 'fields delimited by \'|\', without a trailing \'|\''
complete -c sacct -s T -l truncate -d 'cut the job times to the --starttime/--endtime window'
complete -c sacct -l noconvert -d 'print sizes in their stored unit, unscaled'
complete -c sacct -s X -l allocations -d 'show allocations only, not their steps'
complete -c sacct -l array -d 'one line per array task, even for pending arrays'
complete -c sacct -l json -d 'print the records as JSON'
complete -c sacct -l usage -d 'display a brief usage message'
complete -c sacct -s v -l verbose -d 'more diagnostics'
complete -c sacct -s V -l version -d 'print the Slurm version and exit'
