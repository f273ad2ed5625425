"""dispatch: submit and supervise multi-node training jobs on the scheduler you already have."""
