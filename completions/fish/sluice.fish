# Print an optspec for argparse to handle cmd's options that are independent of any subcommand.
function __fish_sluice_global_optspecs
    string join \n h/help
end

function __fish_sluice_needs_command
    # Figure out if the current invocation already has a command.
    set -l cmd (commandline -opc)
    set -e cmd[1]
    argparse -s (__fish_sluice_global_optspecs) -- $cmd 2>/dev/null
    or return
    if set -q argv[1]
        # Also print the command, so this can be used to figure out what it is.
        echo $argv[1]
        return 1
    end
    return 0
end

function __fish_sluice_using_subcommand
    set -l cmd (__fish_sluice_needs_command)
    test -z "$cmd"
    and return 1
    contains -- $cmd[1] $argv
end

complete -c sluice -n "__fish_sluice_needs_command" -s h -l help -d 'Print help (see more with \'--help\')'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "sbatch" -d 'submit a batch script'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "srun" -d 'run a parallel job step (in a new allocation or an existing one)'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "salloc" -d 'obtain an allocation and run a command in it'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "squeue" -d 'view the queue of jobs and steps'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "scancel" -d 'cancel or signal jobs and steps'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "sinfo" -d 'view nodes and partitions'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "scontrol" -d 'view and change jobs, nodes, partitions, reservations, the config'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "sacct" -d 'accounting records of jobs and steps'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "sstat" -d 'live usage of running steps'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "sprio" -d 'priority factors of pending jobs'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "sdiag" -d 'scheduler statistics'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "sshare" -d 'the fair-share tree'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "sacctmgr" -d 'accounts, users, QOS and associations'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "sreport" -d 'usage reports'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "seff" -d 'efficiency of a finished job'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "controller" -d 'start (or --stop) the controller, which schedules and keeps state'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "agent" -d 'a node\'s agent, started by the controller (locally or over ssh)'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "stepd" -d 'a job step\'s supervisor, started by the agent'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "simulate" -d 'replay a workload trace or scenario through the scheduler'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "keygen" -d 'create the controller\'s SSH key pair for remote nodes'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "doctor" -d 'check what this user\'s controller gets (cgroups, GPUs, nodes)'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "ci" -d 'run a command with a private, throw-away controller (CI pipelines)'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "config" -d 'import a Slurm configuration (slurm.conf, …) or export this one as Slurm\'s'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "version" -d 'print sluice\'s version'
complete -c sluice -n "__fish_sluice_needs_command" -f -a "help" -d 'show this help message'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s J -l job-name -d 'Job name (default: the script\'s base name; sbatch for stdin, wrap for --wrap)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s o -l output -d 'File for the batch script\'s stdout (pattern: %j %x %u %A %a %N %%)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s e -l error -d 'File for the batch script\'s stderr (default: same as --output)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s i -l input -d 'File connected to the batch script\'s stdin (default /dev/null)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s D -l chdir -d 'Working directory of the job (relative to the submit directory)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s p -l partition -d 'Partition(s), comma-separated' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s t -l time -d 'Time limit: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, UNLIMITED' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s n -l ntasks -d 'Number of tasks' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s N -l nodes -d 'Number of nodes: N or MIN-MAX' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s c -l cpus-per-task -d 'CPUs per task' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l ntasks-per-node -l tasks-per-node -d 'Tasks per node' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l mem -d 'Memory per node (units K, M, G, T; default M); 0 = all of the node\'s memory' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l mem-per-cpu -d 'Memory per allocated CPU (units K, M, G, T; default M)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l export -d 'Environment to propagate: ALL, NONE, NAMES, ALL,NAMES, K=V, ...' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s b -l begin -d 'Do not start before TIME: now+N[units], HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], today, tomorrow, midnight, noon' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l nice -d 'Scheduling priority adjustment (default 100 when given without a value)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l signal -d 'Signal before the time limit: [{R|B}:]SIG[@SECS] (default 60 s)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l open-mode -d 'Output files: append or truncate' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s A -l account -d 'Account to charge' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s q -l qos -d 'Quality of service' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l comment -d 'Arbitrary comment' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s w -l nodelist -d 'Nodes the job must include (hostlist)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s x -l exclude -d 'Nodes the job must not use (hostlist)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l exclusive -d 'Do not share nodes with other jobs' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s M -l clusters -d 'Cluster(s) to submit to (only this cluster exists)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s a -l array -d 'Job array indices: LIST of N, A-B, A-B:STEP, with an optional %MAX_RUNNING' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s d -l dependency -d 'Start after other jobs: TYPE:JOB[:JOB...] joined by , (all) or ? (any); TYPE is after, afterany, afterok, afternotok, aftercorr; or singleton' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l kill-on-invalid-dep -d 'Cancel the job if a dependency can never be satisfied' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l deadline -d 'Remove the job if it cannot end before TIME (same forms as --begin)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s I -l immediate -d 'Submit only if the job can start at once' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l gres -d 'Generic resources per node: NAME[:TYPE][:COUNT],...' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s G -l gpus -d 'GPUs for the whole job: [TYPE:]N' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l gpus-per-node -d 'GPUs per node: [TYPE:]N' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l gpus-per-task -d 'GPUs per task: [TYPE:]N' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l gpus-per-socket -d 'GPUs on each socket the job uses (allocations also need --sockets-per-node)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l sockets-per-node -d 'Sockets the job needs on each node' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l cpus-per-gpu -d 'CPUs per allocated GPU' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l mem-per-gpu -d 'Memory per allocated GPU (units K, M, G, T; default M)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l ntasks-per-gpu -d 'Tasks per GPU: with -n, the GPU count follows; with GPUs, the task count' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l gpu-bind -d 'GPU binding of tasks (sbatch/salloc: the default of the job\'s steps): [verbose,]closest|map_gpu:L|mask_gpu:L|single:N|none' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l gres-flags -d 'CPUs and GPU affinity: enforce-binding (only CPUs near the job\'s GPUs) or disable-binding (affinity ignored)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s C -l constraint -d 'Node features required: a&b, a|b, a*N, [a|b]' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l reservation -d 'Reservation to run in' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l switches -d 'Most leaf switches wanted, and how long to wait for them: N[@TIME]' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s L -l licenses -d 'Licenses: NAME[:COUNT],...' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l priority -d 'Fixed priority (operators only)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l time-min -d 'Minimum time limit: backfill may shorten the limit down to it' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s m -l distribution -d 'Task distribution: block, cyclic, plane=N' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l mincpus -d 'Minimum CPUs per node' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l tmp -d 'Minimum temporary disk per node (units K, M, G, T; default M)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l threads-per-core -d 'Nodes with at least N threads per core; tasks use N threads of each core' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l ntasks-per-core -d 'At most N tasks on each core' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l hint -d 'Task layout hint: nomultithread, multithread, compute_bound, memory_bound' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s k -l no-kill -d 'Do not kill the job when a node fails (=off: the default behaviour)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l container -d '(not supported yet) Container bundle' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l mail-user -d '(ignored) Mail recipient' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l mail-type -d '(ignored) Mail events' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l wckey -d '(ignored) Workload characterisation key' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l get-user-env -d '(ignored) Load the user\'s login environment' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l mpi -d '(ignored) MPI type for steps' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l acctg-freq -d '(ignored) Accounting sampling interval' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l container-image -d 'Image to run the tasks in: a registry reference or a local squashfs/sif/tar file' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l container-mounts -d 'Bind mounts into the container' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l container-workdir -d 'Working directory inside the container' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l container-name -d 'Name the container, to reuse it in the job\'s later steps' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l container-env -d 'Variables whose host value overrides the image\'s' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l wrap -d 'Run this command line under /bin/sh instead of a script' -r
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s H -l hold -d 'Submit the job held (release with scontrol release)'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l requeue -d 'The job may be requeued'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l no-requeue -d 'The job must never be requeued'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s Q -l quiet -d 'Quiet: no informational messages'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s v -l verbose -d 'More diagnostics on stderr (repeatable)'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l contiguous -d 'Nodes with consecutive names'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s s -l oversubscribe -d 'Share CPUs with other jobs where the partition allows it'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s O -l overcommit -d 'Overcommit CPUs: allocate as if one task per node'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l ignore-pbs -d '(ignored) Ignore #PBS directives'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l container-writable -d 'Make the container filesystem writable'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l container-readonly -d 'Make the container filesystem read-only'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l no-container-mount-home -d 'Do not bind-mount the user\'s home directory'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l container-mount-home -d 'Bind-mount the user\'s home directory (the default)'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l container-remap-root -d 'Become root inside the container'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l no-container-remap-root -d 'Keep the user\'s identity inside the container (the default)'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l parsable -d 'Print only the job id (and ;cluster with -M)'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s W -l wait -d 'Return when the job ends, with its exit code'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l test-only -d 'Only estimate when the job would start; create nothing'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s V -l version -d 'Print the version (as slurm <version>)'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -s h -l help -d 'Show this help message'
complete -c sluice -n "__fish_sluice_using_subcommand sbatch" -l usage -d 'Display a brief usage message'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s J -l job-name -d 'Job name (default: the script\'s base name; sbatch for stdin, wrap for --wrap)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s o -l output -d 'File for the batch script\'s stdout (pattern: %j %x %u %A %a %N %%)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s e -l error -d 'File for the batch script\'s stderr (default: same as --output)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s i -l input -d 'File connected to the batch script\'s stdin (default /dev/null)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s D -l chdir -d 'Working directory of the job (relative to the submit directory)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s p -l partition -d 'Partition(s), comma-separated' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s t -l time -d 'Time limit: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, UNLIMITED' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s n -l ntasks -d 'Number of tasks' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s N -l nodes -d 'Number of nodes: N or MIN-MAX' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s c -l cpus-per-task -d 'CPUs per task' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l ntasks-per-node -l tasks-per-node -d 'Tasks per node' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l mem -d 'Memory per node (units K, M, G, T; default M); 0 = all of the node\'s memory' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l mem-per-cpu -d 'Memory per allocated CPU (units K, M, G, T; default M)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l export -d 'Environment to propagate: ALL, NONE, NAMES, ALL,NAMES, K=V, ...' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s b -l begin -d 'Do not start before TIME: now+N[units], HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], today, tomorrow, midnight, noon' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l nice -d 'Scheduling priority adjustment (default 100 when given without a value)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l signal -d 'Signal before the time limit: [{R|B}:]SIG[@SECS] (default 60 s)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l open-mode -d 'Output files: append or truncate' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s A -l account -d 'Account to charge' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s q -l qos -d 'Quality of service' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l comment -d 'Arbitrary comment' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s w -l nodelist -d 'Nodes the job must include (hostlist)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s x -l exclude -d 'Nodes the job must not use (hostlist)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l exclusive -d 'Do not share nodes with other jobs' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s M -l clusters -d 'Cluster(s) to submit to (only this cluster exists)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s a -l array -d 'Job array indices: LIST of N, A-B, A-B:STEP, with an optional %MAX_RUNNING' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s d -l dependency -d 'Start after other jobs: TYPE:JOB[:JOB...] joined by , (all) or ? (any); TYPE is after, afterany, afterok, afternotok, aftercorr; or singleton' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l kill-on-invalid-dep -d 'Cancel the job if a dependency can never be satisfied' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l deadline -d 'Remove the job if it cannot end before TIME (same forms as --begin)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s I -l immediate -d 'Submit only if the job can start at once' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l gres -d 'Generic resources per node: NAME[:TYPE][:COUNT],...' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s G -l gpus -d 'GPUs for the whole job: [TYPE:]N' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l gpus-per-node -d 'GPUs per node: [TYPE:]N' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l gpus-per-task -d 'GPUs per task: [TYPE:]N' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l gpus-per-socket -d 'GPUs on each socket the job uses (allocations also need --sockets-per-node)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l sockets-per-node -d 'Sockets the job needs on each node' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l cpus-per-gpu -d 'CPUs per allocated GPU' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l mem-per-gpu -d 'Memory per allocated GPU (units K, M, G, T; default M)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l ntasks-per-gpu -d 'Tasks per GPU: with -n, the GPU count follows; with GPUs, the task count' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l gpu-bind -d 'GPU binding of tasks (sbatch/salloc: the default of the job\'s steps): [verbose,]closest|map_gpu:L|mask_gpu:L|single:N|none' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l gres-flags -d 'CPUs and GPU affinity: enforce-binding (only CPUs near the job\'s GPUs) or disable-binding (affinity ignored)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s C -l constraint -d 'Node features required: a&b, a|b, a*N, [a|b]' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l reservation -d 'Reservation to run in' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l switches -d 'Most leaf switches wanted, and how long to wait for them: N[@TIME]' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s L -l licenses -d 'Licenses: NAME[:COUNT],...' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l priority -d 'Fixed priority (operators only)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l time-min -d 'Minimum time limit: backfill may shorten the limit down to it' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s m -l distribution -d 'Task distribution: block, cyclic, plane=N' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l mincpus -d 'Minimum CPUs per node' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l tmp -d 'Minimum temporary disk per node (units K, M, G, T; default M)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l threads-per-core -d 'Nodes with at least N threads per core; tasks use N threads of each core' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l ntasks-per-core -d 'At most N tasks on each core' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l hint -d 'Task layout hint: nomultithread, multithread, compute_bound, memory_bound' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s k -l no-kill -d 'Do not kill the job when a node fails (=off: the default behaviour)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l container -d '(not supported yet) Container bundle' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l mail-user -d '(ignored) Mail recipient' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l mail-type -d '(ignored) Mail events' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l wckey -d '(ignored) Workload characterisation key' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l get-user-env -d '(ignored) Load the user\'s login environment' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l mpi -d '(ignored) MPI type for steps' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l acctg-freq -d '(ignored) Accounting sampling interval' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l container-image -d 'Image to run the tasks in: a registry reference or a local squashfs/sif/tar file' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l container-mounts -d 'Bind mounts into the container' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l container-workdir -d 'Working directory inside the container' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l container-name -d 'Name the container, to reuse it in the job\'s later steps' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l container-env -d 'Variables whose host value overrides the image\'s' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s K -l kill-on-bad-exit -d 'End the step when a task exits non-zero (0 disables)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l jobid -d 'Run in this existing job' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l cpu-bind -l cpu_bind -d 'Bind tasks to CPUs: none, cores, threads[,verbose]' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s W -l wait -d 'Seconds to wait after the first task ends before ending the step (accepted)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l het-group -d 'Heterogeneous job components the step runs on: 0,1 | 0-2 | 1 (default: 0)' -r
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s H -l hold -d 'Submit the job held (release with scontrol release)'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l requeue -d 'The job may be requeued'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l no-requeue -d 'The job must never be requeued'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s Q -l quiet -d 'Quiet: no informational messages'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s v -l verbose -d 'More diagnostics on stderr (repeatable)'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l contiguous -d 'Nodes with consecutive names'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s s -l oversubscribe -d 'Share CPUs with other jobs where the partition allows it'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s O -l overcommit -d 'Overcommit CPUs: allocate as if one task per node'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l ignore-pbs -d '(ignored) Ignore #PBS directives'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l container-writable -d 'Make the container filesystem writable'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l container-readonly -d 'Make the container filesystem read-only'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l no-container-mount-home -d 'Do not bind-mount the user\'s home directory'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l container-mount-home -d 'Bind-mount the user\'s home directory (the default)'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l container-remap-root -d 'Become root inside the container'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l no-container-remap-root -d 'Keep the user\'s identity inside the container (the default)'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s l -l label -d 'Prefix each output line with the task\'s rank'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l multi-prog -d 'The command is a configuration file of per-rank programs'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l pty -d 'Run task 0 on a pseudo-terminal'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s u -l unbuffered -d 'Do not line-buffer the tasks\' output'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l overlap -d 'Share CPUs with the job\'s other steps'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l exact -d 'Use only the CPUs asked for (not all of the job\'s on each node)'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s X -l disable-status -d 'Ctrl-C is forwarded at once instead of printing the step\'s status'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s E -l preserve-env -d 'Take -n/-N from the environment only (accepted)'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s Z -l no-allocate -d 'Run on the -w nodes without an allocation (root and SlurmUser only)'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s V -l version -d 'Print the version (as slurm <version>)'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -s h -l help -d 'Show this help message'
complete -c sluice -n "__fish_sluice_using_subcommand srun" -l usage -d 'Display a brief usage message'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s J -l job-name -d 'Job name (default: the script\'s base name; sbatch for stdin, wrap for --wrap)' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s o -l output -d 'File for the batch script\'s stdout (pattern: %j %x %u %A %a %N %%)' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s e -l error -d 'File for the batch script\'s stderr (default: same as --output)' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s i -l input -d 'File connected to the batch script\'s stdin (default /dev/null)' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s D -l chdir -d 'Working directory of the job (relative to the submit directory)' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s p -l partition -d 'Partition(s), comma-separated' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s t -l time -d 'Time limit: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, UNLIMITED' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s n -l ntasks -d 'Number of tasks' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s N -l nodes -d 'Number of nodes: N or MIN-MAX' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s c -l cpus-per-task -d 'CPUs per task' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l ntasks-per-node -l tasks-per-node -d 'Tasks per node' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l mem -d 'Memory per node (units K, M, G, T; default M); 0 = all of the node\'s memory' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l mem-per-cpu -d 'Memory per allocated CPU (units K, M, G, T; default M)' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l export -d 'Environment to propagate: ALL, NONE, NAMES, ALL,NAMES, K=V, ...' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s b -l begin -d 'Do not start before TIME: now+N[units], HH:MM[:SS], YYYY-MM-DD[THH:MM[:SS]], today, tomorrow, midnight, noon' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l nice -d 'Scheduling priority adjustment (default 100 when given without a value)' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l signal -d 'Signal before the time limit: [{R|B}:]SIG[@SECS] (default 60 s)' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l open-mode -d 'Output files: append or truncate' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s A -l account -d 'Account to charge' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s q -l qos -d 'Quality of service' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l comment -d 'Arbitrary comment' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s w -l nodelist -d 'Nodes the job must include (hostlist)' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s x -l exclude -d 'Nodes the job must not use (hostlist)' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l exclusive -d 'Do not share nodes with other jobs' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s M -l clusters -d 'Cluster(s) to submit to (only this cluster exists)' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s a -l array -d 'Job array indices: LIST of N, A-B, A-B:STEP, with an optional %MAX_RUNNING' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s d -l dependency -d 'Start after other jobs: TYPE:JOB[:JOB...] joined by , (all) or ? (any); TYPE is after, afterany, afterok, afternotok, aftercorr; or singleton' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l kill-on-invalid-dep -d 'Cancel the job if a dependency can never be satisfied' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l deadline -d 'Remove the job if it cannot end before TIME (same forms as --begin)' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s I -l immediate -d 'Submit only if the job can start at once' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l gres -d 'Generic resources per node: NAME[:TYPE][:COUNT],...' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s G -l gpus -d 'GPUs for the whole job: [TYPE:]N' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l gpus-per-node -d 'GPUs per node: [TYPE:]N' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l gpus-per-task -d 'GPUs per task: [TYPE:]N' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l gpus-per-socket -d 'GPUs on each socket the job uses (allocations also need --sockets-per-node)' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l sockets-per-node -d 'Sockets the job needs on each node' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l cpus-per-gpu -d 'CPUs per allocated GPU' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l mem-per-gpu -d 'Memory per allocated GPU (units K, M, G, T; default M)' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l ntasks-per-gpu -d 'Tasks per GPU: with -n, the GPU count follows; with GPUs, the task count' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l gpu-bind -d 'GPU binding of tasks (sbatch/salloc: the default of the job\'s steps): [verbose,]closest|map_gpu:L|mask_gpu:L|single:N|none' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l gres-flags -d 'CPUs and GPU affinity: enforce-binding (only CPUs near the job\'s GPUs) or disable-binding (affinity ignored)' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s C -l constraint -d 'Node features required: a&b, a|b, a*N, [a|b]' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l reservation -d 'Reservation to run in' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l switches -d 'Most leaf switches wanted, and how long to wait for them: N[@TIME]' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s L -l licenses -d 'Licenses: NAME[:COUNT],...' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l priority -d 'Fixed priority (operators only)' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l time-min -d 'Minimum time limit: backfill may shorten the limit down to it' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s m -l distribution -d 'Task distribution: block, cyclic, plane=N' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l mincpus -d 'Minimum CPUs per node' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l tmp -d 'Minimum temporary disk per node (units K, M, G, T; default M)' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l threads-per-core -d 'Nodes with at least N threads per core; tasks use N threads of each core' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l ntasks-per-core -d 'At most N tasks on each core' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l hint -d 'Task layout hint: nomultithread, multithread, compute_bound, memory_bound' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s k -l no-kill -d 'Do not kill the job when a node fails (=off: the default behaviour)' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l container -d '(not supported yet) Container bundle' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l mail-user -d '(ignored) Mail recipient' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l mail-type -d '(ignored) Mail events' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l wckey -d '(ignored) Workload characterisation key' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l get-user-env -d '(ignored) Load the user\'s login environment' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l mpi -d '(ignored) MPI type for steps' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l acctg-freq -d '(ignored) Accounting sampling interval' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l container-image -d 'Image to run the tasks in: a registry reference or a local squashfs/sif/tar file' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l container-mounts -d 'Bind mounts into the container' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l container-workdir -d 'Working directory inside the container' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l container-name -d 'Name the container, to reuse it in the job\'s later steps' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l container-env -d 'Variables whose host value overrides the image\'s' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s K -l kill-command -d 'Signal to send the command when the allocation ends (accepted)' -r
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s H -l hold -d 'Submit the job held (release with scontrol release)'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l requeue -d 'The job may be requeued'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l no-requeue -d 'The job must never be requeued'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s Q -l quiet -d 'Quiet: no informational messages'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s v -l verbose -d 'More diagnostics on stderr (repeatable)'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l contiguous -d 'Nodes with consecutive names'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s s -l oversubscribe -d 'Share CPUs with other jobs where the partition allows it'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s O -l overcommit -d 'Overcommit CPUs: allocate as if one task per node'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l ignore-pbs -d '(ignored) Ignore #PBS directives'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l container-writable -d 'Make the container filesystem writable'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l container-readonly -d 'Make the container filesystem read-only'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l no-container-mount-home -d 'Do not bind-mount the user\'s home directory'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l container-mount-home -d 'Bind-mount the user\'s home directory (the default)'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l container-remap-root -d 'Become root inside the container'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l no-container-remap-root -d 'Keep the user\'s identity inside the container (the default)'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l no-shell -d '(not supported) Grant the allocation without running a command'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l bell -d 'Ring the terminal bell when the allocation is granted (accepted)'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l no-bell -d 'Do not ring the bell (accepted)'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s V -l version -d 'Print the version (as slurm <version>)'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -s h -l help -d 'Show this help message'
complete -c sluice -n "__fish_sluice_using_subcommand salloc" -l usage -d 'Display a brief usage message'
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -s A -l account -d 'Comma separated list of accounts to view' -r
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -s j -l jobs -l job -d 'Comma separated list of job ids to view; without a list (Slurm\'s optional j:: argument), every job' -r
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -s M -l clusters -d 'Cluster(s) to query; prints a CLUSTER: line first' -r
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -s n -l name -d 'Comma separated list of job names to view' -r
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -s o -l format -d 'Output format (%.18i %9P …)' -r
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -s O -l Format -d 'Long output format (JobID,Name:30,…)' -r
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -s p -l partition -d 'Comma separated list of partitions to view' -r
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -s q -l qos -d 'Comma separated list of QOS to view' -r
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -s S -l sort -d 'Sort keys (P,t,-p)' -r
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -s s -l steps -d 'Show job steps (optionally only these JOB.STEPs) instead of jobs' -r
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -s t -l states -d 'Comma separated list of states to view (all, PD, running, …)' -r
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -s u -l user -d 'Comma separated list of users to view' -r
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -s w -l nodelist -d 'Only jobs on these nodes' -r
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -s a -l all -d 'Display jobs in hidden partitions too'
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -s r -l array -d 'Display one job array element per line'
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -s h -l noheader -d 'Do not print a header line'
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -s l -l long -d 'Long report (adds STATE and TIME_LIMIT, and a time banner)'
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -l me -d 'Show only jobs of the calling user'
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -l noconvert -d 'Don\'t convert units to their human readable form'
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -l only-job-state -d 'Show only the job id and its compact state'
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -l start -d 'Show the expected start time of pending jobs'
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -s v -l verbose -d 'Verbose output (accepted, no effect)'
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -l json -d 'JSON output (not supported yet)'
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -s V -l version -d 'Print version information'
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -l help -d 'Show this help message'
complete -c sluice -n "__fish_sluice_using_subcommand squeue" -l usage -d 'Display brief usage message'
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -s A -l account -d 'act only on jobs charging this account' -r
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -s M -l clusters -d 'cluster whose jobs to act on (this one only)' -r
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -l cluster -r
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -s n -l name -d 'act only on jobs with this name' -r
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -l jobname -r
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -s p -l partition -d 'act only on jobs in this partition' -r
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -s q -l qos -d 'act only on jobs with this quality of service' -r
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -s R -l reservation -d 'act only on jobs in this reservation' -r
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -s s -l signal -d 'send this signal (name or number) instead of cancelling' -r
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -s t -l state -d 'act only on jobs in this state (PENDING, RUNNING, SUSPENDED)' -r
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -s u -l user -d 'act only on jobs of this user' -r
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -s w -l nodelist -d 'act only on jobs using these nodes' -r
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -l wckey -d 'act only on jobs with this workload characterization key' -r
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -s b -l batch -d 'signal the batch shell only, not its steps'
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -s f -l full -d 'signal the batch shell and every step'
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -s H -l hurry -d 'accepted for compatibility; no burst buffer to stage out'
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -s Q -l quiet -d 'print no error messages'
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -l me -d 'act only on jobs of the calling user'
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -s v -l verbose -d 'say what is done, and report unknown or ended jobs'
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -s V -l version -d 'print the Slurm version and exit'
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -s h -l help -d 'show this help message'
complete -c sluice -n "__fish_sluice_using_subcommand scancel" -l usage -d 'display a brief usage message'
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -s M -l clusters -d 'Cluster(s) to query; prints a CLUSTER: line first' -r
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -s n -l nodes -d 'Only these nodes (hostlist expression)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -s o -l format -d 'Output format (%P %D %t)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -s O -l Format -d 'Long output format (NodeList,StateLong,CPUsState)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -s p -l partition -d 'Only these partitions (comma separated)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -s S -l sort -d 'Sort order (accepted; output follows partition and node order)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -s t -l states -d 'Only nodes in these states (idle,mix,alloc, drain, down, …)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -s a -l all -d 'Show all partitions, hidden ones too'
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -s d -l dead -d 'Only nodes that are not responding'
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -s e -l exact -d 'Group only nodes with identical configuration (the default here)'
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -s h -l noheader -d 'Do not print a header line'
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -s l -l long -d 'Long report, with a time banner'
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -s N -l Node -d 'Node-oriented: one line per node'
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -l noconvert -d 'Don\'t convert units to their human readable form'
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -s r -l responding -d 'Only responding nodes'
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -s R -l list-reasons -d 'List reasons nodes are down, drained or failing'
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -s s -l summarize -d 'Summary: one line per partition with node counts by state'
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -s v -l verbose -d 'Verbose output (accepted, no effect)'
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -l json -d 'JSON output: Slurm\'s openapi/v0.0.38 node objects'
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -s V -l version -d 'Print slurm <version>'
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -l help -d 'Show this help message'
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -l usage -d 'Display brief usage message'
complete -c sluice -n "__fish_sluice_using_subcommand sinfo" -s T -l reservation -d 'Show reservations instead of partitions'
complete -c sluice -n "__fish_sluice_using_subcommand scontrol" -s M -l clusters -d 'cluster to act on (this one only)' -r
complete -c sluice -n "__fish_sluice_using_subcommand scontrol" -l cluster -r
complete -c sluice -n "__fish_sluice_using_subcommand scontrol" -s a -l all -d 'accepted: every partition is shown anyway'
complete -c sluice -n "__fish_sluice_using_subcommand scontrol" -s d -l details -d 'more detail in show output'
complete -c sluice -n "__fish_sluice_using_subcommand scontrol" -s h -l help -d 'show this help message'
complete -c sluice -n "__fish_sluice_using_subcommand scontrol" -l json -d 'show output as JSON'
complete -c sluice -n "__fish_sluice_using_subcommand scontrol" -s o -l oneliner -d 'print each record on one line'
complete -c sluice -n "__fish_sluice_using_subcommand scontrol" -s Q -l quiet -d 'print no error messages'
complete -c sluice -n "__fish_sluice_using_subcommand scontrol" -l usage -d 'same as --help'
complete -c sluice -n "__fish_sluice_using_subcommand scontrol" -s v -l verbose -d 'more diagnostics'
complete -c sluice -n "__fish_sluice_using_subcommand scontrol" -s V -l version -d 'print the Slurm version and exit'
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s A -l accounts -d 'show only jobs charged to these accounts' -r
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s M -l clusters -d 'show records of these clusters (all: every one)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -l cluster -r
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s E -l endtime -d 'show jobs in any state before this time' -r
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s o -l format -d 'comma separated fields to print (see --helpformat), each with an optional %width' -r
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s j -l jobs -d 'show only these comma separated jobs or steps' -r
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -l name -d 'show only jobs with these names' -r
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s N -l nodelist -d 'show only jobs that ran on these nodes' -r
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -l delimiter -d 'delimiter for --parsable and --parsable2 in place of |' -r
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s r -l partition -d 'show only jobs in these partitions' -r
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s q -l qos -d 'show only jobs with these qualities of service' -r
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s S -l starttime -d 'show jobs in any state after this time (default: midnight)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s s -l state -d 'show only jobs in these states (CD, F, R, PD, ...)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s u -l user -d 'show only jobs of these users' -r
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -l units -d 'print sizes in this unit' -r
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s a -l allusers -d 'show jobs of every user, not only your own'
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s b -l brief -d 'short listing: jobid, state and exit code'
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s L -l allclusters -d 'show records of every cluster'
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s D -l duplicates -d 'also show the earlier runs of requeued jobs'
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s e -l helpformat -d 'list the fields --format accepts'
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s h -l help -d 'show this help message'
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s l -l long -d 'long listing: every usage field'
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s n -l noheader -d 'print no header line'
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s p -l parsable -d 'fields delimited by \'|\', with a trailing \'|\''
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s P -l parsable2 -d 'fields delimited by \'|\', without a trailing \'|\''
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s T -l truncate -d 'cut the job times to the --starttime/--endtime window'
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -l noconvert -d 'print sizes in their stored unit, unscaled'
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s X -l allocations -d 'show allocations only, not their steps'
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -l array -d 'one line per array task, even for pending arrays'
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -l json -d 'print the records as JSON'
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -l usage -d 'display a brief usage message'
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s v -l verbose -d 'more diagnostics'
complete -c sluice -n "__fish_sluice_using_subcommand sacct" -s V -l version -d 'print the Slurm version and exit'
complete -c sluice -n "__fish_sluice_using_subcommand sstat" -s o -l format -d 'comma separated fields to print (see --helpformat)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sstat" -l fields -r
complete -c sluice -n "__fish_sluice_using_subcommand sstat" -s j -l jobs -d 'comma separated jobs or steps to show (required)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sstat" -s a -l allsteps -d 'show every step of the given jobs'
complete -c sluice -n "__fish_sluice_using_subcommand sstat" -s e -l helpformat -d 'list the fields --format accepts'
complete -c sluice -n "__fish_sluice_using_subcommand sstat" -s h -l help -d 'show this help message'
complete -c sluice -n "__fish_sluice_using_subcommand sstat" -s n -l noheader -d 'print no header line'
complete -c sluice -n "__fish_sluice_using_subcommand sstat" -l noconvert -d 'print sizes in their stored unit, unscaled'
complete -c sluice -n "__fish_sluice_using_subcommand sstat" -s i -l pidformat -d 'show the pids of each step (pid format)'
complete -c sluice -n "__fish_sluice_using_subcommand sstat" -s p -l parsable -d 'fields delimited by \'|\', with a trailing \'|\''
complete -c sluice -n "__fish_sluice_using_subcommand sstat" -s P -l parsable2 -d 'fields delimited by \'|\', without a trailing \'|\''
complete -c sluice -n "__fish_sluice_using_subcommand sstat" -l usage -d 'display a brief usage message'
complete -c sluice -n "__fish_sluice_using_subcommand sstat" -s v -l verbose -d 'more diagnostics'
complete -c sluice -n "__fish_sluice_using_subcommand sstat" -s V -l version -d 'print the Slurm version and exit'
complete -c sluice -n "__fish_sluice_using_subcommand sprio" -s j -l jobs -d 'show only these comma separated jobs' -r
complete -c sluice -n "__fish_sluice_using_subcommand sprio" -s M -l clusters -d 'cluster to query (this one only)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sprio" -s o -l format -d 'output format (%i %u %Y %A %F ...)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sprio" -s S -l sort -d 'sort by these fields (-y,i: priority descending, then job id)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sprio" -s p -l partition -d 'show only jobs in these partitions' -r
complete -c sluice -n "__fish_sluice_using_subcommand sprio" -s u -l user -d 'show only jobs of these users' -r
complete -c sluice -n "__fish_sluice_using_subcommand sprio" -l users -r
complete -c sluice -n "__fish_sluice_using_subcommand sprio" -s h -l noheader -d 'print no header line'
complete -c sluice -n "__fish_sluice_using_subcommand sprio" -s l -l long -d 'every factor, and NICE'
complete -c sluice -n "__fish_sluice_using_subcommand sprio" -s n -l norm -d 'normalized factor values (0 to 1)'
complete -c sluice -n "__fish_sluice_using_subcommand sprio" -s v -l verbose -d 'more diagnostics'
complete -c sluice -n "__fish_sluice_using_subcommand sprio" -s V -l version -d 'print the Slurm version and exit'
complete -c sluice -n "__fish_sluice_using_subcommand sprio" -s w -l weights -d 'print the configured factor weights'
complete -c sluice -n "__fish_sluice_using_subcommand sprio" -l federation -d 'accepted: one cluster, no federation'
complete -c sluice -n "__fish_sluice_using_subcommand sprio" -l local -d 'accepted: one cluster, no federation'
complete -c sluice -n "__fish_sluice_using_subcommand sprio" -l sibling -d 'accepted: one cluster, no federation'
complete -c sluice -n "__fish_sluice_using_subcommand sprio" -l help -d 'show this help message'
complete -c sluice -n "__fish_sluice_using_subcommand sprio" -l usage -d 'display a brief usage message'
complete -c sluice -n "__fish_sluice_using_subcommand sdiag" -s M -l clusters -d 'cluster to query (this one only)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sdiag" -l cluster -r
complete -c sluice -n "__fish_sluice_using_subcommand sdiag" -s a -l all -d 'all statistics (the default)'
complete -c sluice -n "__fish_sluice_using_subcommand sdiag" -s h -l help -d 'show this help message'
complete -c sluice -n "__fish_sluice_using_subcommand sdiag" -s i -l sort-by-id -d 'sort RPCs by id (accepted)'
complete -c sluice -n "__fish_sluice_using_subcommand sdiag" -l json -d 'print the statistics as JSON'
complete -c sluice -n "__fish_sluice_using_subcommand sdiag" -s r -l reset -d 'reset the statistics (not supported by sluice)'
complete -c sluice -n "__fish_sluice_using_subcommand sdiag" -s t -l sort-by-time -d 'sort RPCs by total time (accepted)'
complete -c sluice -n "__fish_sluice_using_subcommand sdiag" -s T -l sort-by-time2 -d 'sort RPCs by average time (accepted)'
complete -c sluice -n "__fish_sluice_using_subcommand sdiag" -l usage -d 'display a brief usage message'
complete -c sluice -n "__fish_sluice_using_subcommand sdiag" -s V -l version -d 'print the Slurm version and exit'
complete -c sluice -n "__fish_sluice_using_subcommand sshare" -s A -l accounts -d 'show only these accounts' -r
complete -c sluice -n "__fish_sluice_using_subcommand sshare" -s M -l clusters -d 'clusters to show (this one only)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sshare" -l cluster -r
complete -c sluice -n "__fish_sluice_using_subcommand sshare" -s o -l format -d 'fields to print, each with an optional %width' -r
complete -c sluice -n "__fish_sluice_using_subcommand sshare" -s u -l users -d 'show only these users' -r
complete -c sluice -n "__fish_sluice_using_subcommand sshare" -s a -l all -d 'show every user, not only yourself'
complete -c sluice -n "__fish_sluice_using_subcommand sshare" -s l -l long -d 'long listing: adds NormUsage, LevelFS and TRES columns'
complete -c sluice -n "__fish_sluice_using_subcommand sshare" -s m -l partition -d 'add a Partition column'
complete -c sluice -n "__fish_sluice_using_subcommand sshare" -s n -s h -l noheader -d 'print no header line'
complete -c sluice -n "__fish_sluice_using_subcommand sshare" -s p -l parsable -d 'fields delimited by \'|\', with a trailing \'|\''
complete -c sluice -n "__fish_sluice_using_subcommand sshare" -s P -l parsable2 -d 'fields delimited by \'|\', without a trailing \'|\''
complete -c sluice -n "__fish_sluice_using_subcommand sshare" -s U -l users-only -d 'show user rows only, no account rows'
complete -c sluice -n "__fish_sluice_using_subcommand sshare" -s v -l verbose -d 'more diagnostics'
complete -c sluice -n "__fish_sluice_using_subcommand sshare" -s V -l version -d 'print the Slurm version and exit'
complete -c sluice -n "__fish_sluice_using_subcommand sshare" -l help -d 'show this help message'
complete -c sluice -n "__fish_sluice_using_subcommand sshare" -l usage -d 'display a brief usage message'
complete -c sluice -n "__fish_sluice_using_subcommand sacctmgr" -s h -l help -d 'show this help message'
complete -c sluice -n "__fish_sluice_using_subcommand sacctmgr" -s i -l immediate -d 'commit changes without asking'
complete -c sluice -n "__fish_sluice_using_subcommand sacctmgr" -s n -l noheader -d 'print no header line'
complete -c sluice -n "__fish_sluice_using_subcommand sacctmgr" -s p -l parsable -d 'fields delimited by \'|\', with a trailing \'|\''
complete -c sluice -n "__fish_sluice_using_subcommand sacctmgr" -s P -l parsable2 -d 'fields delimited by \'|\', without a trailing \'|\''
complete -c sluice -n "__fish_sluice_using_subcommand sacctmgr" -s Q -l quiet -d 'print no messages other than errors'
complete -c sluice -n "__fish_sluice_using_subcommand sacctmgr" -s r -l readonly -d 'accepted; changes are not refused'
complete -c sluice -n "__fish_sluice_using_subcommand sacctmgr" -s s -l associations -d 'show the associations of the listed entities'
complete -c sluice -n "__fish_sluice_using_subcommand sacctmgr" -l usage -d 'same as --help'
complete -c sluice -n "__fish_sluice_using_subcommand sacctmgr" -s v -l verbose -d 'more diagnostics'
complete -c sluice -n "__fish_sluice_using_subcommand sacctmgr" -s V -l version -d 'print the Slurm version and exit'
complete -c sluice -n "__fish_sluice_using_subcommand sreport" -s M -l cluster -d 'cluster to report on (this one only)' -r
complete -c sluice -n "__fish_sluice_using_subcommand sreport" -l clusters -r
complete -c sluice -n "__fish_sluice_using_subcommand sreport" -s t -l time_format -d 'time unit: Seconds, Minutes, Hours, Percent, SecPer, MinPer, HourPer' -r
complete -c sluice -n "__fish_sluice_using_subcommand sreport" -s T -l tres -d 'accepted: reports count CPU time' -r
complete -c sluice -n "__fish_sluice_using_subcommand sreport" -s a -l all_clusters -d 'accepted: there is one cluster'
complete -c sluice -n "__fish_sluice_using_subcommand sreport" -s h -l help -d 'show this help message'
complete -c sluice -n "__fish_sluice_using_subcommand sreport" -s n -l noheader -d 'print no header lines'
complete -c sluice -n "__fish_sluice_using_subcommand sreport" -s p -l parsable -d 'fields delimited by \'|\', with a trailing \'|\''
complete -c sluice -n "__fish_sluice_using_subcommand sreport" -s P -l parsable2 -d 'fields delimited by \'|\', without a trailing \'|\''
complete -c sluice -n "__fish_sluice_using_subcommand sreport" -s Q -l quiet -d 'print no warnings'
complete -c sluice -n "__fish_sluice_using_subcommand sreport" -l usage -d 'same as --help'
complete -c sluice -n "__fish_sluice_using_subcommand sreport" -s v -l verbose -d 'more diagnostics'
complete -c sluice -n "__fish_sluice_using_subcommand sreport" -s V -l version -d 'print the Slurm version and exit'
complete -c sluice -n "__fish_sluice_using_subcommand seff" -s h -l help -d 'help menu (exit status 1; --help exits 0)'
complete -c sluice -n "__fish_sluice_using_subcommand seff" -l usage -d 'the same text as --help'
complete -c sluice -n "__fish_sluice_using_subcommand seff" -s v -d 'print seff\'s version and exit 1'
complete -c sluice -n "__fish_sluice_using_subcommand seff" -s d -d 'debug mode: accepted (the raw record is sacct -l -j JOBID)'
complete -c sluice -n "__fish_sluice_using_subcommand controller" -s h -l help -d 'Print help'
complete -c sluice -n "__fish_sluice_using_subcommand agent" -s h -l help -d 'Print help'
complete -c sluice -n "__fish_sluice_using_subcommand stepd" -s h -l help -d 'Print help'
complete -c sluice -n "__fish_sluice_using_subcommand simulate" -s h -l help -d 'Print help'
complete -c sluice -n "__fish_sluice_using_subcommand keygen" -s h -l help -d 'Print help'
complete -c sluice -n "__fish_sluice_using_subcommand doctor" -s h -l help -d 'Print help'
complete -c sluice -n "__fish_sluice_using_subcommand ci" -s h -l help -d 'Print help'
complete -c sluice -n "__fish_sluice_using_subcommand config" -s h -l help -d 'Print help'
complete -c sluice -n "__fish_sluice_using_subcommand version" -s h -l help -d 'Print help'
complete -c sluice -n "__fish_sluice_using_subcommand help" -s h -l help -d 'Print help'
