"""The cubic study's figures; each reads tables and saved tensors only."""
