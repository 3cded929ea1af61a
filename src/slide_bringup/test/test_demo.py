"""``slide demo``'s verdict: the graph's word checked against the twin's truth."""

from __future__ import annotations

from slide_bringup.commands.demo import format_text


def test_a_grasp_the_graph_called_held_that_the_twin_saw_fail_is_not_lifted() -> None:
    # The text said 'lifted and held' and gave no reason while the result was not ok (the
    # object had fallen, or stayed on the table pivoting in the grip).
    result = {
        'object': 'hammer',
        'seed': 0,
        'success': True,
        'ok': False,
        'outcome': 'succeeded',
        'reason': 'the graph reported a grasp that held, but the twin says the object fell',
        'stages': {},
        'exploration_pushes': 5,
        'pushes': 7,
        'fell': True,
        'lifted_true_m': 0.004,
        'nodes': ['twin'],
        'logs': '/tmp/logs',
        'total_s': 60.0,
    }
    text = format_text(result)
    assert text.splitlines()[0] == "hammer, seed 0: NOT LIFTED by the twin's truth"
    assert '  why: the graph reported a grasp that held, but the twin says the object fell' in (
        text.splitlines()
    )
    held = format_text({**result, 'ok': True, 'fell': False, 'lifted_true_m': 0.1})
    assert held.splitlines()[0] == 'hammer, seed 0: lifted and held' and 'why' not in held
