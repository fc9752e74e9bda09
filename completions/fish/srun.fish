complete -c srun -s J -l job-name -d 'Job name (default: the script\'s base name; sbatch for stdin, wrap for --wrap)' -r
complete -c srun -s o -l output -d 'File for the batch script\'s stdout (pattern: %j %x %u %A %a %N %%)' -r
complete -c srun -s e -l error -d 'File for the batch script\'s stderr (default: same as --output)' -r
complete -c srun -s i -l input -d 'File connected to the batch script\'s stdin (default /dev/null)' -r
complete -c srun -s D -l chdir -d 'Working directory of the job (relative to the submit directory)' -r
complete -c srun -s p -l partition -d 'Partition(s), comma-separated' -r
complete -c srun -s t -l time -d 'Time limit: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, UNLIMITED' -r
complete -c srun -s n -l ntasks -d 'Number of tasks' -r
complete -c srun -s N -l nodes -d 'Number of nodes: N or MIN-MAX' -r
complete -c srun -s c -l cpus-per-task -d 'CPUs per task' -r
complete -c srun -l ntasks-per-node -l tasks-per-node -d 'Tasks per node' -r
complete -c srun -l mem -d 'Memory per node (units K, M, G, T; default M); 0 = all of the node\'s memory' -r
complete -c srun -l mem-per-cpu -d 'Memory per allocated CPU (units K, M, G, T; default M)' -r
complete -c srun -l export -d 'Environment to propagate: ALL, NONE, NAMES, ALL,NAMES, K=V, ...' -r
complete -c srun -s b -l begin -d 'Do not start before TIME: now+N[units], HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], today, tomorrow, midnight, noon' -r
complete -c srun -l nice -d 'Scheduling priority adjustment (default 100 when given without a value)' -r
complete -c srun -l signal -d 'Signal before the time limit: [{R|B}:]SIG[@SECS] (default 60 s)' -r
complete -c srun -l open-mode -d 'Output files: append or truncate' -r
complete -c srun -s A -l account -d 'Account to charge' -r
complete -c srun -s q -l qos -d 'Quality of service' -r
complete -c srun -l comment -d 'Arbitrary comment' -r
complete -c srun -s w -l nodelist -d 'Nodes the job must include (hostlist)' -r
complete -c srun -s x -l exclude -d 'Nodes the job must not use (hostlist)' -r
complete -c srun -l exclusive -d 'Do not share nodes with other jobs' -r
complete -c srun -s M -l clusters -d 'Cluster(s) to submit to (only this cluster exists)' -r
complete -c srun -s a -l array -d 'Job array indices: LIST of N, A-B, A-B:STEP, with an optional %MAX_RUNNING' -r
complete -c srun -s d -l dependency -d 'Start after other jobs: TYPE:JOB[:JOB...] joined by , (all) or ? (any); TYPE is after, afterany, afterok, afternotok, aftercorr; or singleton' -r
complete -c srun -l kill-on-invalid-dep -d 'Cancel the job if a dependency can never be satisfied' -r
complete -c srun -l deadline -d 'Remove the job if it cannot end before TIME (same forms as --begin)' -r
complete -c srun -s I -l immediate -d 'Submit only if the job can start at once' -r
complete -c srun -l gres -d 'Generic resources per node: NAME[:TYPE][:COUNT],...' -r
complete -c srun -s G -l gpus -d 'GPUs for the whole job: [TYPE:]N' -r
complete -c srun -l gpus-per-node -d 'GPUs per node: [TYPE:]N' -r
complete -c srun -l gpus-per-task -d 'GPUs per task: [TYPE:]N' -r
complete -c srun -l gpus-per-socket -d 'GPUs on each socket the job uses (allocations also need --sockets-per-node)' -r
complete -c srun -l sockets-per-node -d 'Sockets the job needs on each node' -r
complete -c srun -l cpus-per-gpu -d 'CPUs per allocated GPU' -r
complete -c srun -l mem-per-gpu -d 'Memory per allocated GPU (units K, M, G, T; default M)' -r
complete -c srun -l ntasks-per-gpu -d 'Tasks per GPU: with -n, the GPU count follows; with GPUs, the task count' -r
complete -c srun -l gpu-bind -d 'GPU binding of tasks (sbatch/salloc: the default of the job\'s steps): [verbose,]closest|map_gpu:L|mask_gpu:L|single:N|none' -r
complete -c srun -l gres-flags -d 'CPUs and GPU affinity: enforce-binding (only CPUs near the job\'s GPUs) or disable-binding (affinity ignored)' -r
complete -c srun -s C -l constraint -d 'Node features required: a&b, a|b, a*N, [a|b]' -r
complete -c srun -l reservation -d 'Reservation to run in' -r
complete -c srun -l switches -d 'Most leaf switches wanted, and how long to wait for them: N[@TIME]' -r
complete -c srun -s L -l licenses -d 'Licenses: NAME[:COUNT],...' -r
complete -c srun -l priority -d 'Fixed priority (operators only)' -r
complete -c srun -l time-min -d 'Minimum time limit: backfill may shorten the limit down to it' -r
complete -c srun -s m -l distribution -d 'Task distribution: block, cyclic, plane=N' -r
complete -c srun -l mincpus -d 'Minimum CPUs per node' -r
complete -c srun -l tmp -d 'Minimum temporary disk per node (units K, M, G, T; default M)' -r
complete -c srun -l threads-per-core -d 'Nodes with at least N threads per core; tasks use N threads of each core' -r
complete -c srun -l ntasks-per-core -d 'At most N tasks on each core' -r
complete -c srun -l hint -d 'Task layout hint: nomultithread, multithread, compute_bound, memory_bound' -r
complete -c srun -s k -l no-kill -d 'Do not kill the job when a node fails (=off: the default behaviour)' -r
complete -c srun -l container -d '(not supported yet) Container bundle' -r
complete -c srun -l mail-user -d '(ignored) Mail recipient' -r
complete -c srun -l mail-type -d '(ignored) Mail events' -r
complete -c srun -l wckey -d '(ignored) Workload characterisation key' -r
complete -c srun -l get-user-env -d '(ignored) Load the user\'s login environment' -r
complete -c srun -l mpi -d '(ignored) MPI type for steps' -r
complete -c srun -l acctg-freq -d '(ignored) Accounting sampling interval' -r
complete -c srun -l container-image -d 'Image to run the tasks in: a registry reference or a local squashfs/sif/tar file' -r
complete -c srun -l container-mounts -d 'Bind mounts into the container' -r
complete -c srun -l container-workdir -d 'Working directory inside the container' -r
complete -c srun -l container-name -d 'Name the container, to reuse it in the job\'s later steps' -r
complete -c srun -l container-env -d 'Variables whose host value overrides the image\'s' -r
complete -c srun -s K -l kill-on-bad-exit -d 'End the step when a task exits non-zero (0 disables)' -r
complete -c srun -l jobid -d 'Run in this existing job' -r
complete -c srun -l cpu-bind -l cpu_bind -d 'Bind tasks to CPUs: none, cores, threads[,verbose]' -r
complete -c srun -s W -l wait -d 'Seconds to wait after the first task ends before ending the step (accepted)' -r
complete -c srun -l het-group -d 'Heterogeneous job components the step runs on: 0,1 | 0-2 | 1 (default: 0)' -r
complete -c srun -s H -l hold -d 'Submit the job held (release with scontrol release)'
complete -c srun -l requeue -d 'The job may be requeued'
complete -c srun -l no-requeue -d 'The job must never be requeued'
complete -c srun -s Q -l quiet -d 'Quiet: no informational messages'
complete -c srun -s v -l verbose -d 'More diagnostics on stderr (repeatable)'
complete -c srun -l contiguous -d 'Nodes with consecutive names'
complete -c srun -s s -l oversubscribe -d 'Share CPUs with other jobs where the partition allows it'
complete -c srun -s O -l overcommit -d 'Overcommit CPUs: allocate as if one task per node'
complete -c srun -l ignore-pbs -d '(ignored) Ignore #PBS directives'
complete -c srun -l container-writable -d 'Make the container filesystem writable'
complete -c srun -l container-readonly -d 'Make the container filesystem read-only'
complete -c srun -l no-container-mount-home -d 'Do not bind-mount the user\'s home directory'
complete -c srun -l container-mount-home -d 'Bind-mount the user\'s home directory (the default)'
complete -c srun -l container-remap-root -d 'Become root inside the container'
complete -c srun -l no-container-remap-root -d 'Keep the user\'s identity inside the container (the default)'
complete -c srun -s l -l label -d 'Prefix each output line with the task\'s rank'
complete -c srun -l multi-prog -d 'The command is a configuration file of per-rank programs'
complete -c srun -l pty -d 'Run task 0 on a pseudo-terminal'
complete -c srun -s u -l unbuffered -d 'Do not line-buffer the tasks\' output'
complete -c srun -l overlap -d 'Share CPUs with the job\'s other steps'
complete -c srun -l exact -d 'Use only the CPUs asked for (not all of the job\'s on each node)'
complete -c srun -s X -l disable-status -d 'Ctrl-C is forwarded at once instead of printing the step\'s status'
complete -c srun -s E -l preserve-env -d 'Take -n/-N from the environment only (accepted)'
complete -c srun -s Z -l no-allocate -d 'Run on the -w nodes without an allocation (root and SlurmUser only)'
complete -c srun -s V -l version -d 'Print the version (as slurm <version>)'
complete -c srun -s h -l help -d 'Show this help message'
complete -c srun -l usage -d 'Display a brief usage message'
