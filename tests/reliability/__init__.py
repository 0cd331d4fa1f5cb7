"""The reliability figures of issue 19, measured black-box against a stack the suite starts
(README.md)."""
