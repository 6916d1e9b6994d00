"""The pure core: the API types and every decision (costs, GPU labels, hints, ranking, status).

It imports only the standard library, pydantic and itself: no I/O, no event loop, no client,
nothing from view/, shell/ or app/. `make lint` checks that with import-linter.
"""
