complete -c sreport -s M -l cluster -d 'cluster to report on (this one only)' -r
complete -c sreport -l clusters -r
complete -c sreport -s t -l time_format -d 'time unit: Seconds, Minutes, Hours, Percent, SecPer, MinPer, HourPer' -r
complete -c sreport -s T -l tres -d 'accepted: reports count CPU time' -r
complete -c sreport -s a -l all_clusters -d 'accepted: there is one cluster'
complete -c sreport -s h -l help -d 'show this help message'
complete -c sreport -s n -l noheader -d 'print no header lines'
complete -c sreport -s p -l parsable -d 'fields delimited by \'|\', with a trailing \'|\''
complete -c sreport -s P -l parsable2 -d 'fields delimited by \'|\', without a trailing \'|\''
complete -c sreport -s Q -l quiet -d 'print no warnings'
complete -c sreport -l usage -d 'same as --help'
complete -c sreport -s v -l verbose -d 'more diagnostics'
complete -c sreport -s V -l version -d 'print the Slurm version and exit'
