complete -c sstat -s o -l format -d 'comma separated fields to print (see --helpformat)' -r
complete -c sstat -l fields -r
complete -c sstat -s j -l jobs -d 'comma separated jobs or steps to show (required)' -r
complete -c sstat -s a -l allsteps -d 'show every step of the given jobs'
complete -c sstat -s e -l helpformat -d 'list the fields --format accepts'
complete -c sstat -s h -l help -d 'show this help message'
complete -c sstat -s n -l noheader -d 'print no header line'
complete -c sstat -l noconvert -d 'print sizes in their stored unit, unscaled'
complete -c sstat -s i -l pidformat -d 'show the pids of each step (pid format)'
complete -c sstat -s p -l parsable -d 'fields delimited by \'|\', with a trailing \'|\''
complete -c sstat -s P -l parsable2 -d 'fields delimited by \'|\', without a trailing \'|\''
complete -c sstat -l usage -d 'display a brief usage message'
complete -c sstat -s v -l verbose -d 'more diagnostics'
complete -c sstat -s V -l version -d 'print the Slurm version and exit'
