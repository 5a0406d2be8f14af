"""End to end at scale: published throughput of pure FSDP training at several GPU counts,
predicted from the smallest count of each group (:mod:`.study`).

Modules: :mod:`.points` (the published points, checked), :mod:`.settings` (the study's
switches: comm model per GPU type, overlap slowdown, stragglers), :mod:`.hooks` (where the
overlap-slowdown and straggler models plug in), :mod:`.predict` (FLOPs trace, FSDP2 replay,
calibration), :mod:`.growth` (error, perfect scaling, growth explained), :mod:`.study`.
"""
