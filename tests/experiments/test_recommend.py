"""The recommendation's tie rule for DDP bucket caps (synthetic points, labelled)."""

from __future__ import annotations

from gradsched.experiments.recommend import (
    DDPPoint,
    pick_ddp,
)


def test_pick_ddp_ties_go_to_the_default_then_the_smallest_cap() -> None:
    # synthetic points (labelled): equal times are ties
    pts = [DDPPoint(None, 1.0, 3, 2.0), DDPPoint(4.0, 4.0, 5, 1.0), DDPPoint(2.0, 2.0, 6, 1.0)]
    assert pick_ddp(pts).bucket_cap_mb == 2.0
    pts.append(DDPPoint(None, 1.0, 3, 1.0))
    assert pick_ddp(pts).bucket_cap_mb is None
    assert pick_ddp([DDPPoint(8.0, 8.0, 2, 0.5), *pts]).bucket_cap_mb == 8.0
