"""The ``lava`` lab backend: run a recipe on two kernel builds as LAVA jobs (REST API v0.2).

How a run works
---------------
* ``submit`` validates the :class:`RunSpec`, checks that a token is configured, creates
  ``<work_dir>/runs/<run id>/`` (``spec.json``, ``state.json``) and starts a detached *preparer*
  (``python -m bot.lab.backends.lava prepare <run dir>``, its own session) that resolves both
  builds (:mod:`bot.lab.builds`; a tree build can take long, so submit never blocks on it),
  stages the kernel images and busybox initramfs archives under ``artifact_dir/<run id>/``
  (served to the dispatcher as ``artifact_url/<run id>/...``; ``file://`` works when the
  dispatcher runs on this host), renders the job definition(s), POSTs them to
  ``/api/v0.2/jobs/`` and records the LAVA job ids in ``state.json``, then exits.  The handle is
  ``lava:<run id>``.
* **Job format: one LAVA job holds a whole run** (``batches_per_job = 0``, the default): the
  RunSpec's batches in its order (``abab`` by default), each batch one ``deploy`` (tmpfs: kernel +
  initramfs with the LAVA overlay appended) + ``boot`` (qemu) + ``test`` block.  So the two builds
  alternate boot by boot **on the same device** (a comparison across two boards would measure
  the boards), and the ~20-40 s of scheduling per LAVA job is paid once.  With
  ``batches_per_job = k`` the schedule is cut into consecutive jobs of k batches, all submitted at
  once in order (LAVA runs same-priority jobs of one device type first come first served; with
  several devices they may run in parallel on different boards: pin them with ``device_tags``).
* In each boot the test definition runs ``sh /regtriage/report.sh`` (a fixed step).  That script
  is in our initramfs: it runs ``/regtriage/bench.sh`` (the recipe's busybox workload from
  :meth:`RecipeSpec.render_guest_script`, as in the qemu backend: warm-ups then samples) and
  reports every value with ``lava-test-case <metric>-<n> --result pass --measurement <v> --units <u>``;
  warm-ups as ``warmup-<metric>-<n>`` (kept in ``Samples.warmups``, never among the samples), the
  guest's kernel release as ``uname-<release>`` and the outcome as ``regtriage-result`` pass/fail.
  The suite of batch *i* of build *b* is ``<index>_regtriage-b<iii>-<b>``.
* ``poll`` maps LAVA ``state``/``health`` to ours: Submitted, Scheduling, Scheduled -> queued;
  Running, Canceling -> running; Finished+Complete -> done (once results are read and checked);
  Finished+Incomplete -> failed (LAVA's ``failure_comment``); Finished+Canceled -> failed,
  cancelled.  Any failed job fails the run and the run's other unfinished jobs are cancelled.
  A server that does not answer is *not* a failure: the last status is returned with a note.
  When finished, the outcome, samples (``result.json``) and the job logs are stored on disk and
  the server is not asked again; staged artifacts are deleted.
* ``fetch_samples`` reads ``/api/v0.2/jobs/<id>/tests/`` (all pages) and checks every batch:
  ``regtriage-result`` pass, exactly the expected sample/warm-up names, positive measurements,
  the expected kernel release per build (when known from the build).
* ``cancel`` stops the preparer (if still running) and calls ``/api/v0.2/jobs/<id>/cancel/`` for
  every unfinished job, then waits (``cancel_wait_s``) for LAVA to finish them.

Modules: :mod:`~bot.lab.backends.lava.config`, :mod:`~bot.lab.backends.lava.client` (REST),
:mod:`~bot.lab.backends.lava.job` (job definitions), :mod:`~bot.lab.backends.lava.results`
(LAVA's answers read), :mod:`~bot.lab.backends.lava.guest` (the busybox initramfs),
:mod:`~bot.lab.backends.lava.backend` (submit, poll, cancel) and
:mod:`~bot.lab.backends.lava.prepare` (the preparer process).  The run's state is
:class:`~bot.lab.backends.runstate.RunMachine`'s: LAVA's job states go in as progress, the
results batch by batch in the schedule's order.

Restart safety: everything is in the run directory (spec, LAVA job ids, status); a new backend
built from the same configuration resumes polling with the handle alone.  The token is never
written there (the preparer inherits the environment / reads the token file itself).

Job definitions are emitted with :func:`json.dumps` (JSON is YAML, LAVA parses it with its YAML
loader): no string templating, and the only strings in a job are constants, validated config
values, the run id and the RunSpec label (both ``[A-Za-z0-9._-]``) and generated URLs.  Nothing
from mail reaches a job except through the validated recipe numbers inside the initramfs.

Configuration ``[lab.lava]``:

=====================  ===============================================================================
url                    LAVA server base URL (``https://lava.example.org/``); required
token_env              environment variable holding the API token (default ``REGTRIAGE_LAVA_TOKEN``)
token_file             or a file holding it (used when the variable is unset); never a literal token
device_type            LAVA device type (default ``qemu``; the jobs use the qemu boot method)
device_tags            list of device tags the jobs require (default none)
visibility             ``public`` (default) or ``personal``
priority               ``high``/``medium``/``low`` or 0..100 (default ``medium``)
no_kvm                 add ``no_kvm: true`` to the job context (TCG; default false)
context                extra job context entries (string keys, int/bool/short safe string values)
memory_mib             guest memory in the job context (default: recipe scratch + 256, >= 512; a
                       device dictionary that sets ``memory`` wins)
batches_per_job        0 (default): whole run in one job; k: k batches per job
job_timeout_s          cap on a job's timeout (default: the RunSpec's ``timeouts.total_s``)
deploy_timeout_s       per deploy action (default 300)
connection_timeout_s   LAVA connection timeout (default 120)
artifact_dir           where kernels/initramfs are staged (default ``<work_dir>/artifacts``)
artifact_url           URL prefix the dispatcher downloads them from (default ``file://<artifact_dir>``)
keep_artifacts         keep staged files after the run (default false)
work_dir               run state (default ``$REGTRIAGE_HOME/lab/lava``)
build_cache, deb_dir   as for qemu (default ``<work_dir>/builds``)
busybox                static busybox for the initramfs (default ``/bin/busybox``)
http_timeout_s         per request (default 30); GETs are retried 3x with backoff on errors/5xx
cancel_wait_s          how long ``cancel`` waits for LAVA to finish the jobs (default 60)
=====================  ===============================================================================

Recipes: those the qemu backend runs in its busybox guest without extra guest tools
(``RecipeSpec.supports("lava")``: dd and syscall-getpid).
"""

from bot.lab.backends.lava.backend import LavaBackend
from bot.lab.backends.lava.client import LavaClient
from bot.lab.backends.lava.config import LavaConfig
from bot.lab.backends.lava.guest import build_initramfs, render_guest_files, units_for
from bot.lab.backends.lava.job import chunk_schedule, guest_memory_mib, render_job, suite_name
from bot.lab.backends.lava.prepare import main, prepare
from bot.lab.backends.lava.results import failure_reason, map_lava_state, parse_results

__all__ = ["LavaBackend", "LavaClient", "LavaConfig", "build_initramfs", "chunk_schedule", "failure_reason",
           "guest_memory_mib", "main", "map_lava_state", "parse_results", "prepare", "render_guest_files",
           "render_job", "suite_name", "units_for"]
