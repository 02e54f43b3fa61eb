"""Greetings."""


class Greeter:
    """Greets people."""

    def greet(self, name: str) -> str:
        """Return a greeting for name."""
        return "Hello, " + name


def hello(name: str) -> str:
    """Greet name in English."""
    return Greeter().greet(name)
