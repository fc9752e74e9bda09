complete -c sprio -s j -l jobs -d 'show only these comma separated jobs' -r
complete -c sprio -s M -l clusters -d 'cluster to query (this one only)' -r
complete -c sprio -s o -l format -d 'output format (%i %u %Y %A %F ...)' -r
complete -c sprio -s S -l sort -d 'sort by these fields (-y,i: priority descending, then job id)' -r
complete -c sprio -s p -l partition -d 'show only jobs in these partitions' -r
complete -c sprio -s u -l user -d 'show only jobs of these users' -r
complete -c sprio -l users -r
complete -c sprio -s h -l noheader -d 'print no header line'
complete -c sprio -s l -l long -d 'every factor, and NICE'
complete -c sprio -s n -l norm -d 'normalized factor values (0 to 1)'
complete -c sprio -s v -l verbose -d 'more diagnostics'
complete -c sprio -s V -l version -d 'print the Slurm version and exit'
complete -c sprio -s w -l weights -d 'print the configured factor weights'
complete -c sprio -l federation -d 'accepted: one cluster, no federation'
complete -c sprio -l local -d 'accepted: one cluster, no federation'
complete -c sprio -l sibling -d 'accepted: one cluster, no federation'
complete -c sprio -l help -d 'show this help message'
complete -c sprio -l usage -d 'display a brief usage message'
