"""Built binaries: verification against the record, the record itself, stub classification."""
