"""read_intermediate's memo (gradsched.intermediates): a text read again gives an equal,
independent frame; an edited text is parsed and checked again (SYNTHETIC fit tables)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradsched.errors import InputError
from gradsched.intermediates import FITS, read_intermediate

HEADER = ("trace,collective,backend,world_size,nodes,model,n_sizes,min_bytes,max_bytes,"
          "train_mape_pct,heldout_mape_pct,heldout_max_ape_pct,alpha_s,beta_s_per_byte,"
          "n_segments\n")
ROW = "x,all_reduce,mpi,2,2,alpha-beta,52,256,8388608,25.0,26.1,89.6,0.00015,2.2e-09,1\n"


def test_a_text_read_again_is_an_equal_independent_frame(tmp_path: Path) -> None:
    path = tmp_path / "fits.csv"
    path.write_text(HEADER + ROW)
    first = read_intermediate(path, (FITS,))
    first.loc[0, "n_sizes"] = -5  # a caller's edit stays its own
    again = read_intermediate(path, (FITS,))
    assert again.loc[0, "n_sizes"] == 52
    assert again.equals(read_intermediate(path, (FITS,)))


def test_an_edited_text_is_checked_again(tmp_path: Path) -> None:
    path = tmp_path / "fits.csv"
    path.write_text(HEADER + ROW)
    read_intermediate(path, (FITS,))
    path.write_text(HEADER + ROW.replace(",256,8388608,", ",8388608,256,"))  # same size
    with pytest.raises(InputError, match=r"fits.csv, row 1, field 'max_bytes'"):
        read_intermediate(path, (FITS,))
