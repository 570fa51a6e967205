"""The consumer: holds the target (D_v and a test set) and receives what the protocol delivers."""
