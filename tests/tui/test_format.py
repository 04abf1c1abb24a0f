"""How the TUI squeezes text into cells: run ids lose their middle, so head and distinguishing tail stay."""

from __future__ import annotations

import pytest

from workbench.tui.format import elide_middle


class TestElideMiddle:
    def test_an_id_that_fits_is_unchanged(self) -> None:
        assert elide_middle("gsm8k-mock-3f9a2c", 17) == "gsm8k-mock-3f9a2c"

    def test_a_long_id_keeps_its_head_and_its_tail(self) -> None:
        run_id = "gsm8k_cot_zeroshot-mock-20260103-090000-b71e04"
        short = elide_middle(run_id, 30)
        assert short == "gsm8k_cot_zero…3-090000-b71e04"
        assert len(short) == 30

    def test_two_ids_that_differ_only_at_the_end_stay_apart(self) -> None:
        a = elide_middle("mmlu-llama-3.1-8b-instruct-20260102-100000-3f9a2c", 20)
        b = elide_middle("mmlu-llama-3.1-8b-instruct-20260102-100000-3f9a2d", 20)
        assert a != b and a.endswith("3f9a2c") and b.endswith("3f9a2d")

    @pytest.mark.parametrize("limit", [0, 1, 2, 3, 7, 8])
    def test_never_longer_than_the_limit(self, limit: int) -> None:
        assert len(elide_middle("abcdefghijklmnop", limit)) == limit

    def test_one_cell_is_the_ellipsis(self) -> None:
        assert elide_middle("abcdef", 1) == "…"
