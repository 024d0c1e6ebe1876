"""Developer tooling behind the README commands (`python3 -m dev ...`), standard library only.

Everything here runs under the system interpreter, before the virtualenv exists, so no module
of this package imports anything outside the standard library (or the project's Django code).
"""
