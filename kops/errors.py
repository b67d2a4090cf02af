"""Errors that map onto kops' exit codes (docs/architecture.md, "The contracts every command keeps").

0 success / complete / healthy; 1 runtime failure; 2 bad input (nothing changed);
3 not done yet / problems found.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_BAD_INPUT = 2
EXIT_NOT_DONE = 3


class KopsError(Exception):
    """Base class; ``exit_code`` says how the CLI ends."""

    exit_code = EXIT_FAILURE
    #: how the CLI names it on stderr (``error: <message>``); a stop that is no failure says so
    label = "error"

    def __init__(self, message: str, *, details: list[str] | None = None):
        super().__init__(message)
        self.message = message
        self.details = list(details or [])

    def to_dict(self) -> dict:
        return {"error": type(self).__name__, "message": self.message, "details": self.details}


class BadInput(KopsError):
    """Invalid input from the user: a bad file, flag or value. Nothing was changed."""

    exit_code = EXIT_BAD_INPUT


class ClusterError(KopsError):
    """The cluster could not be reached or an operation on it failed."""

    exit_code = EXIT_FAILURE


class ClusterTimeout(ClusterError):
    """A request got no answer in time (a broker slow, restarting or cut off) after the
    cluster had been reached. Reads may be sent again; writes must check what landed first."""


class AuthorizationError(ClusterError):
    """The cluster refused an operation for lack of authorization."""


class AuthenticationError(ClusterError):
    """The cluster (or ZooKeeper) refused the login: wrong user/password, mechanism or protocol."""
