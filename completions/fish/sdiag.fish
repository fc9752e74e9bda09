complete -c sdiag -s M -l clusters -d 'cluster to query (this one only)' -r
complete -c sdiag -l cluster -r
complete -c sdiag -s a -l all -d 'all statistics (the default)'
complete -c sdiag -s h -l help -d 'show this help message'
complete -c sdiag -s i -l sort-by-id -d 'sort RPCs by id (accepted)'
complete -c sdiag -l json -d 'print the statistics as JSON'
complete -c sdiag -s r -l reset -d 'reset the statistics (not supported by sluice)'
complete -c sdiag -s t -l sort-by-time -d 'sort RPCs by total time (accepted)'
complete -c sdiag -s T -l sort-by-time2 -d 'sort RPCs by average time (accepted)'
complete -c sdiag -l usage -d 'display a brief usage message'
complete -c sdiag -s V -l version -d 'print the Slurm version and exit'
