"""The physics benchmark's replay of recorded fingertip pushes (the 88-cell book)."""

from __future__ import annotations

from slide_bringup.bench.physics import replay


def test_a_recorded_push_replays_without_the_general_qp() -> None:
    messages: list[str] = []
    result = replay(messages.append, pushes=1, repeats=1)
    assert result['replay_pushes'] == 1 and result['replay_object'] == 'book (88 cells)'
    assert result['replay_steps_per_push'] > 50
    assert result['replay_general_qp_fraction'] == 0.0
    assert result['replay_s_per_push'] > 0.0
    assert any('replaying' in m for m in messages)
