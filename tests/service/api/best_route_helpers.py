"""What the GET /best tests share (test_best_route_*.py)."""

from __future__ import annotations


def the_answer(response) -> dict:
    """The one answer of a GET /best that named its gpu."""
    assert response.status_code == 200, response.text
    answers = response.json()["answers"]
    assert len(answers) == 1
    return answers[0]
