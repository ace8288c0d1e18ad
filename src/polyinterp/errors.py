"""Errors raised by polyinterp. Every message names the bad file, key or value and says what to do."""


class PolyinterpError(Exception):
    """Base class of every polyinterp error; messages name the bad thing and the fix."""


class ConfigError(PolyinterpError):
    """A config key is missing, misspelt, mistyped or out of range."""


class DataError(PolyinterpError):
    """An input data file or source is missing, malformed or inconsistent."""


class TrainingError(PolyinterpError):
    """Training diverged or cannot proceed."""
