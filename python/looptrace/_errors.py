"""looptrace's exceptions."""

__all__ = ["SpecError"]


class SpecError(ValueError):
    """Bad input: a spec file, a Jinja variable or an option that contradicts the spec.

    ``file``, ``line`` and ``column`` say where (``""`` and ``0`` when unknown), and
    ``message`` what; ``str()`` gives ``file:line:column: message`` as the CLI prints it.
    """

    def __init__(self, message: str, file: str = "", line: int = 0, column: int = 0):
        self.message = message
        self.file = file
        self.line = line
        self.column = column
        where = ":".join(
            [file] + [str(n) for n in (line, column)[: 2 if column else 1] if n]
        ) if file else ""
        super().__init__(f"{where}: {message}" if where else message)
