"""What archguard prints: explain/list/env text and the P.A.M matrix page."""
