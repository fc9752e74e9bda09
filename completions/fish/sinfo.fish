complete -c sinfo -s M -l clusters -d 'Cluster(s) to query; prints a CLUSTER: line first' -r
complete -c sinfo -s n -l nodes -d 'Only these nodes (hostlist expression)' -r
complete -c sinfo -s o -l format -d 'Output format (%P %D %t)' -r
complete -c sinfo -s O -l Format -d 'Long output format (NodeList,StateLong,CPUsState)' -r
complete -c sinfo -s p -l partition -d 'Only these partitions (comma separated)' -r
complete -c sinfo -s S -l sort -d 'Sort order (accepted; output follows partition and node order)' -r
complete -c sinfo -s t -l states -d 'Only nodes in these states (idle,mix,alloc, drain, down, …)' -r
complete -c sinfo -s a -l all -d 'Show all partitions, hidden ones too'
complete -c sinfo -s d -l dead -d 'Only nodes that are not responding'
complete -c sinfo -s e -l exact -d 'Group only nodes with identical configuration (the default here)'
complete -c sinfo -s h -l noheader -d 'Do not print a header line'
complete -c sinfo -s l -l long -d 'Long report, with a time banner'
complete -c sinfo -s N -l Node -d 'Node-oriented: one line per node'
complete -c sinfo -l noconvert -d 'Don\'t convert units to their human readable form'
complete -c sinfo -s r -l responding -d 'Only responding nodes'
complete -c sinfo -s R -l list-reasons -d 'List reasons nodes are down, drained or failing'
complete -c sinfo -s s -l summarize -d 'Summary: one line per partition with node counts by state'
complete -c sinfo -s v -l verbose -d 'Verbose output (accepted, no effect)'
complete -c sinfo -l json -d 'JSON output: Slurm\'s openapi/v0.0.38 node objects'
complete -c sinfo -s V -l version -d 'Print slurm <version>'
complete -c sinfo -l help -d 'Show this help message'
complete -c sinfo -l usage -d 'Display brief usage message'
complete -c sinfo -s T -l reservation -d 'Show reservations instead of partitions'
