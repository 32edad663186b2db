"""dynscope minify: which layer of torch.compile breaks a program, and a minimal repro.

Processes: the command (no torch) drives everything; the detection run is the user's
program in a child process under the recorder and the failure probe; checks run in one
long-lived worker process (forked afresh from a warm fork server when a check kills it or
poisons its CUDA context; the server itself never initializes CUDA);
the repro is proven in a fresh process.

Modules, one job each:
  session      the whole flow, and the result recorded into the capture
  detect       run the program once and name the failing graph (child.py, probe.py inside it)
  case         the failing graph, its inputs, backend, torch settings and signature
  suspect      --suspect: the numerics check's first suspect placed in the graph, and the subgraph ending there
  fragment     a graph with its inputs as JSON, and the edits that shrink it (no torch)
  graph_ops    the one table of what a rebuilt graph and repro.py may call (no torch)
  graph_check  a recorded graph checked, its names made plain, before anything uses it
  replay_settings  which recorded torch settings are applied again (lowering, numerics)
  rebuild      JSON -> torch.fx.GraphModule through graph_ops' table; inputs from specs
  checks       one check in the worker: compile, run, compare (worker_main.py serves them)
  worker       the parent's side of the worker: timeouts, crashes, restarts
  checker      "does it still fail the same way?", memoized for --resume
  signature    what "the same way" means
  bisect       backends, then CompilerBisector subsystems
  shrink       op screening, prefix search, delta debugging, input shrinking
  repro        write repro.py (standalone.py holds the helpers it carries); verify proves it
  repro_check  repro.py parsed and checked against the table before it is written or run
  attribution  the failing layer read from a traceback, when replay cannot show it
  files        the output directory's files and the crash marker
"""
