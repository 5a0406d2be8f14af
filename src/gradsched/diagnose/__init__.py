"""``gradsched diagnose``: the overlap a job was configured for against the overlap its
trace shows, with the cause of each gap and the change that removes it.

Per rank (:mod:`.observe`) each NCCL collective of one profiled step is timed -- ready,
launched, started, ended -- and its exposed time measured by HTA's interval arithmetic
(:mod:`.exposure`); several ranks are put on one clock (:mod:`.ranks`); the layout is
recognised (:mod:`.layout`); the same layout is replayed on the same compute with a comm
model (:mod:`.predict`); rules with stated thresholds name the causes (:mod:`.causes`) and
the fix is worded in the framework's terms (:mod:`.fixes`). :mod:`.plant` derives traces
with one fault planted (synthetic, for the tests and the paper's table). :mod:`.run` is the
facade the command calls.
"""

from gradsched.diagnose.run import FRAME_COLUMNS, Diagnosis, Settings, diagnose

__all__ = ["FRAME_COLUMNS", "Diagnosis", "Settings", "diagnose"]
