complete -c seff -s h -l help -d 'help menu (exit status 1; --help exits 0)'
complete -c seff -l usage -d 'the same text as --help'
complete -c seff -s v -d 'print seff\'s version and exit 1'
complete -c seff -s d -d 'debug mode: accepted (the raw record is sacct -l -j JOBID)'
