"""A data owner: holds a private dataset and reveals points only through the protocol."""
