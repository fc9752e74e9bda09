complete -c salloc -s J -l job-name -d 'Job name (default: the script\'s base name; sbatch for stdin, wrap for --wrap)' -r
complete -c salloc -s o -l output -d 'File for the batch script\'s stdout (pattern: %j %x %u %A %a %N %%)' -r
complete -c salloc -s e -l error -d 'File for the batch script\'s stderr (default: same as --output)' -r
complete -c salloc -s i -l input -d 'File connected to the batch script\'s stdin (default /dev/null)' -r
complete -c salloc -s D -l chdir -d 'Working directory of the job (relative to the submit directory)' -r
complete -c salloc -s p -l partition -d 'Partition(s), comma-separated' -r
complete -c salloc -s t -l time -d 'Time limit: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, UNLIMITED' -r
complete -c salloc -s n -l ntasks -d 'Number of tasks' -r
complete -c salloc -s N -l nodes -d 'Number of nodes: N or MIN-MAX' -r
complete -c salloc -s c -l cpus-per-task -d 'CPUs per task' -r
complete -c salloc -l ntasks-per-node -l tasks-per-node -d 'Tasks per node' -r
complete -c salloc -l mem -d 'Memory per node (units K, M, G, T; default M); 0 = all of the node\'s memory' -r
complete -c salloc -l mem-per-cpu -d 'Memory per allocated CPU (units K, M, G, T; default M)' -r
complete -c salloc -l export -d 'Environment to propagate: ALL, NONE, NAMES, ALL,NAMES, K=V, ...' -r
complete -c salloc -s b -l begin -d 'Do not start before TIME: now+N[units], HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], today, tomorrow, midnight, noon' -r
complete -c salloc -l nice -d 'Scheduling priority adjustment (default 100 when given without a value)' -r
complete -c salloc -l signal -d 'Signal before the time limit: [{R|B}:]SIG[@SECS] (default 60 s)' -r
complete -c salloc -l open-mode -d 'Output files: append or truncate' -r
complete -c salloc -s A -l account -d 'Account to charge' -r
complete -c salloc -s q -l qos -d 'Quality of service' -r
complete -c salloc -l comment -d 'Arbitrary comment' -r
complete -c salloc -s w -l nodelist -d 'Nodes the job must include (hostlist)' -r
complete -c salloc -s x -l exclude -d 'Nodes the job must not use (hostlist)' -r
complete -c salloc -l exclusive -d 'Do not share nodes with other jobs' -r
complete -c salloc -s M -l clusters -d 'Cluster(s) to submit to (only this cluster exists)' -r
complete -c salloc -s a -l array -d 'Job array indices: LIST of N, A-B, A-B:STEP, with an optional %MAX_RUNNING' -r
complete -c salloc -s d -l dependency -d 'Start after other jobs: TYPE:JOB[:JOB...] joined by , (all) or ? (any); TYPE is after, afterany, afterok, afternotok, aftercorr; or singleton' -r
complete -c salloc -l kill-on-invalid-dep -d 'Cancel the job if a dependency can never be satisfied' -r
complete -c salloc -l deadline -d 'Remove the job if it cannot end before TIME (same forms as --begin)' -r
complete -c salloc -s I -l immediate -d 'Submit only if the job can start at once' -r
complete -c salloc -l gres -d 'Generic resources per node: NAME[:TYPE][:COUNT],...' -r
complete -c salloc -s G -l gpus -d 'GPUs for the whole job: [TYPE:]N' -r
complete -c salloc -l gpus-per-node -d 'GPUs per node: [TYPE:]N' -r
complete -c salloc -l gpus-per-task -d 'GPUs per task: [TYPE:]N' -r
complete -c salloc -l gpus-per-socket -d 'GPUs on each socket the job uses (allocations also need --sockets-per-node)' -r
complete -c salloc -l sockets-per-node -d 'Sockets the job needs on each node' -r
complete -c salloc -l cpus-per-gpu -d 'CPUs per allocated GPU' -r
complete -c salloc -l mem-per-gpu -d 'Memory per allocated GPU (units K, M, G, T; default M)' -r
complete -c salloc -l ntasks-per-gpu -d 'Tasks per GPU: with -n, the GPU count follows; with GPUs, the task count' -r
complete -c salloc -l gpu-bind -d 'GPU binding of tasks (sbatch/salloc: the default of the job\'s steps): [verbose,]closest|map_gpu:L|mask_gpu:L|single:N|none' -r
complete -c salloc -l gres-flags -d 'CPUs and GPU affinity: enforce-binding (only CPUs near the job\'s GPUs) or disable-binding (affinity ignored)' -r
complete -c salloc -s C -l constraint -d 'Node features required: a&b, a|b, a*N, [a|b]' -r
complete -c salloc -l reservation -d 'Reservation to run in' -r
complete -c salloc -l switches -d 'Most leaf switches wanted, and how long to wait for them: N[@TIME]' -r
complete -c salloc -s L -l licenses -d 'Licenses: NAME[:COUNT],...' -r
complete -c salloc -l priority -d 'Fixed priority (operators only)' -r
complete -c salloc -l time-min -d 'Minimum time limit: backfill may shorten the limit down to it' -r
complete -c salloc -s m -l distribution -d 'Task distribution: block, cyclic, plane=N' -r
complete -c salloc -l mincpus -d 'Minimum CPUs per node' -r
complete -c salloc -l tmp -d 'Minimum temporary disk per node (units K, M, G, T; default M)' -r
complete -c salloc -l threads-per-core -d 'Nodes with at least N threads per core; tasks use N threads of each core' -r
complete -c salloc -l ntasks-per-core -d 'At most N tasks on each core' -r
complete -c salloc -l hint -d 'Task layout hint: nomultithread, multithread, compute_bound, memory_bound' -r
complete -c salloc -s k -l no-kill -d 'Do not kill the job when a node fails (=off: the default behaviour)' -r
complete -c salloc -l container -d '(not supported yet) Container bundle' -r
complete -c salloc -l mail-user -d '(ignored) Mail recipient' -r
complete -c salloc -l mail-type -d '(ignored) Mail events' -r
complete -c salloc -l wckey -d '(ignored) Workload characterisation key' -r
complete -c salloc -l get-user-env -d '(ignored) Load the user\'s login environment' -r
complete -c salloc -l mpi -d '(ignored) MPI type for steps' -r
complete -c salloc -l acctg-freq -d '(ignored) Accounting sampling interval' -r
complete -c salloc -l container-image -d 'Image to run the tasks in: a registry reference or a local squashfs/sif/tar file' -r
complete -c salloc -l container-mounts -d 'Bind mounts into the container' -r
complete -c salloc -l container-workdir -d 'Working directory inside the container' -r
complete -c salloc -l container-name -d 'Name the container, to reuse it in the job\'s later steps' -r
complete -c salloc -l container-env -d 'Variables whose host value overrides the image\'s' -r
complete -c salloc -s K -l kill-command -d 'Signal to send the command when the allocation ends (accepted)' -r
complete -c salloc -s H -l hold -d 'Submit the job held (release with scontrol release)'
complete -c salloc -l requeue -d 'The job may be requeued'
complete -c salloc -l no-requeue -d 'The job must never be requeued'
complete -c salloc -s Q -l quiet -d 'Quiet: no informational messages'
complete -c salloc -s v -l verbose -d 'More diagnostics on stderr (repeatable)'
complete -c salloc -l contiguous -d 'Nodes with consecutive names'
complete -c salloc -s s -l oversubscribe -d 'Share CPUs with other jobs where the partition allows it'
complete -c salloc -s O -l overcommit -d 'Overcommit CPUs: allocate as if one task per node'
complete -c salloc -l ignore-pbs -d '(ignored) Ignore #PBS directives'
complete -c salloc -l container-writable -d 'Make the container filesystem writable'
complete -c salloc -l container-readonly -d 'Make the container filesystem read-only'
complete -c salloc -l no-container-mount-home -d 'Do not bind-mount the user\'s home directory'
complete -c salloc -l container-mount-home -d 'Bind-mount the user\'s home directory (the default)'
complete -c salloc -l container-remap-root -d 'Become root inside the container'
complete -c salloc -l no-container-remap-root -d 'Keep the user\'s identity inside the container (the default)'
complete -c salloc -l no-shell -d '(not supported) Grant the allocation without running a command'
complete -c salloc -l bell -d 'Ring the terminal bell when the allocation is granted (accepted)'
complete -c salloc -l no-bell -d 'Do not ring the bell (accepted)'
complete -c salloc -s V -l version -d 'Print the version (as slurm <version>)'
complete -c salloc -s h -l help -d 'Show this help message'
complete -c salloc -l usage -d 'Display a brief usage message'
