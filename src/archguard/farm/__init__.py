"""The farm past one cell: a manifest of packages x cells, its plan (issue 32)."""
