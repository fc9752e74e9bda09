complete -c sshare -s A -l accounts -d 'show only these accounts' -r
complete -c sshare -s M -l clusters -d 'clusters to show (this one only)' -r
complete -c sshare -l cluster -r
complete -c sshare -s o -l format -d 'fields to print, each with an optional %width' -r
complete -c sshare -s u -l users -d 'show only these users' -r
complete -c sshare -s a -l all -d 'show every user, not only yourself'
complete -c sshare -s l -l long -d 'long listing: adds NormUsage, LevelFS and TRES columns'
complete -c sshare -s m -l partition -d 'add a Partition column'
complete -c sshare -s n -s h -l noheader -d 'print no header line'
complete -c sshare -s p -l parsable -d 'fields delimited by \'|\', with a trailing \'|\''
complete -c sshare -s P -l parsable2 -d 'fields delimited by \'|\', without a trailing \'|\''
complete -c sshare -s U -l users-only -d 'show user rows only, no account rows'
complete -c sshare -s v -l verbose -d 'more diagnostics'
complete -c sshare -s V -l version -d 'print the Slurm version and exit'
complete -c sshare -l help -d 'show this help message'
complete -c sshare -l usage -d 'display a brief usage message'
