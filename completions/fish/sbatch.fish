complete -c sbatch -s J -l job-name -d 'Job name (default: the script\'s base name; sbatch for stdin, wrap for --wrap)' -r
complete -c sbatch -s o -l output -d 'File for the batch script\'s stdout (pattern: %j %x %u %A %a %N %%)' -r
complete -c sbatch -s e -l error -d 'File for the batch script\'s stderr (default: same as --output)' -r
complete -c sbatch -s i -l input -d 'File connected to the batch script\'s stdin (default /dev/null)' -r
complete -c sbatch -s D -l chdir -d 'Working directory of the job (relative to the submit directory)' -r
complete -c sbatch -s p -l partition -d 'Partition(s), comma-separated' -r
complete -c sbatch -s t -l time -d 'Time limit: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, UNLIMITED' -r
complete -c sbatch -s n -l ntasks -d 'Number of tasks' -r
complete -c sbatch -s N -l nodes -d 'Number of nodes: N or MIN-MAX' -r
complete -c sbatch -s c -l cpus-per-task -d 'CPUs per task' -r
complete -c sbatch -l ntasks-per-node -l tasks-per-node -d 'Tasks per node' -r
complete -c sbatch -l mem -d 'Memory per node (units K, M, G, T; default M); 0 = all of the node\'s memory' -r
complete -c sbatch -l mem-per-cpu -d 'Memory per allocated CPU (units K, M, G, T; default M)' -r
complete -c sbatch -l export -d 'Environment to propagate: ALL, NONE, NAMES, ALL,NAMES, K=V, ...' -r
complete -c sbatch -s b -l begin -d 'Do not start before TIME: now+N[units], HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], today, tomorrow, midnight, noon' -r
complete -c sbatch -l nice -d 'Scheduling priority adjustment (default 100 when given without a value)' -r
complete -c sbatch -l signal -d 'Signal before the time limit: [{R|B}:]SIG[@SECS] (default 60 s)' -r
complete -c sbatch -l open-mode -d 'Output files: append or truncate' -r
complete -c sbatch -s A -l account -d 'Account to charge' -r
complete -c sbatch -s q -l qos -d 'Quality of service' -r
complete -c sbatch -l comment -d 'Arbitrary comment' -r
complete -c sbatch -s w -l nodelist -d 'Nodes the job must include (hostlist)' -r
complete -c sbatch -s x -l exclude -d 'Nodes the job must not use (hostlist)' -r
complete -c sbatch -l exclusive -d 'Do not share nodes with other jobs' -r
complete -c sbatch -s M -l clusters -d 'Cluster(s) to submit to (only this cluster exists)' -r
complete -c sbatch -s a -l array -d 'Job array indices: LIST of N, A-B, A-B:STEP, with an optional %MAX_RUNNING' -r
complete -c sbatch -s d -l dependency -d 'Start after other jobs: TYPE:JOB[:JOB...] joined by , (all) or ? (any); TYPE is after, afterany, afterok, afternotok, aftercorr; or singleton' -r
complete -c sbatch -l kill-on-invalid-dep -d 'Cancel the job if a dependency can never be satisfied' -r
complete -c sbatch -l deadline -d 'Remove the job if it cannot end before TIME (same forms as --begin)' -r
complete -c sbatch -s I -l immediate -d 'Submit only if the job can start at once' -r
complete -c sbatch -l gres -d 'Generic resources per node: NAME[:TYPE][:COUNT],...' -r
complete -c sbatch -s G -l gpus -d 'GPUs for the whole job: [TYPE:]N' -r
complete -c sbatch -l gpus-per-node -d 'GPUs per node: [TYPE:]N' -r
complete -c sbatch -l gpus-per-task -d 'GPUs per task: [TYPE:]N' -r
complete -c sbatch -l gpus-per-socket -d 'GPUs on each socket the job uses (allocations also need --sockets-per-node)' -r
complete -c sbatch -l sockets-per-node -d 'Sockets the job needs on each node' -r
complete -c sbatch -l cpus-per-gpu -d 'CPUs per allocated GPU' -r
complete -c sbatch -l mem-per-gpu -d 'Memory per allocated GPU (units K, M, G, T; default M)' -r
complete -c sbatch -l ntasks-per-gpu -d 'Tasks per GPU: with -n, the GPU count follows; with GPUs, the task count' -r
complete -c sbatch -l gpu-bind -d 'GPU binding of tasks (sbatch/salloc: the default of the job\'s steps): [verbose,]closest|map_gpu:L|mask_gpu:L|single:N|none' -r
complete -c sbatch -l gres-flags -d 'CPUs and GPU affinity: enforce-binding (only CPUs near the job\'s GPUs) or disable-binding (affinity ignored)' -r
complete -c sbatch -s C -l constraint -d 'Node features required: a&b, a|b, a*N, [a|b]' -r
complete -c sbatch -l reservation -d 'Reservation to run in' -r
complete -c sbatch -l switches -d 'Most leaf switches wanted, and how long to wait for them: N[@TIME]' -r
complete -c sbatch -s L -l licenses -d 'Licenses: NAME[:COUNT],...' -r
complete -c sbatch -l priority -d 'Fixed priority (operators only)' -r
complete -c sbatch -l time-min -d 'Minimum time limit: backfill may shorten the limit down to it' -r
complete -c sbatch -s m -l distribution -d 'Task distribution: block, cyclic, plane=N' -r
complete -c sbatch -l mincpus -d 'Minimum CPUs per node' -r
complete -c sbatch -l tmp -d 'Minimum temporary disk per node (units K, M, G, T; default M)' -r
complete -c sbatch -l threads-per-core -d 'Nodes with at least N threads per core; tasks use N threads of each core' -r
complete -c sbatch -l ntasks-per-core -d 'At most N tasks on each core' -r
complete -c sbatch -l hint -d 'Task layout hint: nomultithread, multithread, compute_bound, memory_bound' -r
complete -c sbatch -s k -l no-kill -d 'Do not kill the job when a node fails (=off: the default behaviour)' -r
complete -c sbatch -l container -d '(not supported yet) Container bundle' -r
complete -c sbatch -l mail-user -d '(ignored) Mail recipient' -r
complete -c sbatch -l mail-type -d '(ignored) Mail events' -r
complete -c sbatch -l wckey -d '(ignored) Workload characterisation key' -r
complete -c sbatch -l get-user-env -d '(ignored) Load the user\'s login environment' -r
complete -c sbatch -l mpi -d '(ignored) MPI type for steps' -r
complete -c sbatch -l acctg-freq -d '(ignored) Accounting sampling interval' -r
complete -c sbatch -l container-image -d 'Image to run the tasks in: a registry reference or a local squashfs/sif/tar file' -r
complete -c sbatch -l container-mounts -d 'Bind mounts into the container' -r
complete -c sbatch -l container-workdir -d 'Working directory inside the container' -r
complete -c sbatch -l container-name -d 'Name the container, to reuse it in the job\'s later steps' -r
complete -c sbatch -l container-env -d 'Variables whose host value overrides the image\'s' -r
complete -c sbatch -l wrap -d 'Run this command line under /bin/sh instead of a script' -r
complete -c sbatch -s H -l hold -d 'Submit the job held (release with scontrol release)'
complete -c sbatch -l requeue -d 'The job may be requeued'
complete -c sbatch -l no-requeue -d 'The job must never be requeued'
complete -c sbatch -s Q -l quiet -d 'Quiet: no informational messages'
complete -c sbatch -s v -l verbose -d 'More diagnostics on stderr (repeatable)'
complete -c sbatch -l contiguous -d 'Nodes with consecutive names'
complete -c sbatch -s s -l oversubscribe -d 'Share CPUs with other jobs where the partition allows it'
complete -c sbatch -s O -l overcommit -d 'Overcommit CPUs: allocate as if one task per node'
complete -c sbatch -l ignore-pbs -d '(ignored) Ignore #PBS directives'
complete -c sbatch -l container-writable -d 'Make the container filesystem writable'
complete -c sbatch -l container-readonly -d 'Make the container filesystem read-only'
complete -c sbatch -l no-container-mount-home -d 'Do not bind-mount the user\'s home directory'
complete -c sbatch -l container-mount-home -d 'Bind-mount the user\'s home directory (the default)'
complete -c sbatch -l container-remap-root -d 'Become root inside the container'
complete -c sbatch -l no-container-remap-root -d 'Keep the user\'s identity inside the container (the default)'
complete -c sbatch -l parsable -d 'Print only the job id (and ;cluster with -M)'
complete -c sbatch -s W -l wait -d 'Return when the job ends, with its exit code'
complete -c sbatch -l test-only -d 'Only estimate when the job would start; create nothing'
complete -c sbatch -s V -l version -d 'Print the version (as slurm <version>)'
complete -c sbatch -s h -l help -d 'Show this help message'
complete -c sbatch -l usage -d 'Display a brief usage message'
