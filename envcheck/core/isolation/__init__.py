"""Isolation: every isolated check runs in a worker process forked from one fork server, bounded by deadlines.

Three processes, one module each, and the parent's two handles:
- `forkserver` (`ForkLoop`): a fresh interpreter in its own session that imports torch once, never initialises
  CUDA, and forks a worker per isolation group on request;
- `worker`: the forked child that runs one group's checks (its own process group; it initialises CUDA itself);
- `server_handle` (`ServerHandle`) and `worker_handle` (`WorkerHandle`): envcheck's side of each, which starts it,
  bounds every request and kills the whole process group on timeout or crash;
- `protocol` (`Op`): the requests both understand; `failure` (`WorkerFailure`): why one gave no answer;
- `process_state` (`Saved`) and `knobs`: the process-global state a check may change (backend flags, default dtype,
  grad mode, generators, ...), set back after every check so that a check's verdict never depends on what ran
  before it in its worker.

Whatever ends envcheck, its workers end too: the server and every worker watch a lifeline (a pipe whose only write
end envcheck holds) and kill their groups at EOF.
"""
