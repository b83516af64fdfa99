"""The refusals of cks-sim's CloudStack rules in CloudStack's terms: the error the rules raise
(HTTP/API error code, cserrorcode, text) and the cserrorcode values of the exception classes they
stand for. ``cloudstack_api`` answers a ``CloudError`` with CloudStack's error response."""

from __future__ import annotations

# cserrorcode values (CSExceptionErrorCode) for the exception classes the rules raise.
CS_INVALID_PARAMETER = 4350
CS_CLOUD_RUNTIME = 4250
CS_PERMISSION_DENIED = 4365
CS_SERVER_API = 9999

NOT_STOPPED_HINT = "make sure the virtual machine is stopped"


class CloudError(Exception):
    """A refusal in CloudStack's terms: HTTP/API error code, cserrorcode and text."""

    def __init__(self, code: int, text: str, cserrorcode: int = CS_INVALID_PARAMETER) -> None:
        super().__init__(text)
        self.code = code
        self.text = text
        self.cserrorcode = cserrorcode


def param_error(text: str) -> CloudError:
    return CloudError(431, text, CS_INVALID_PARAMETER)
