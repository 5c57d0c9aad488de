"""Settings: the package's [tool.archguard] (and a farm's ARCHGUARD_CONFIG), the opt-in, and
the one place the inputs of a resolution are assembled (:mod:`archguard.settings.inputs`)."""
