"""``archguard wheel``, the front end that launches pip: the sources it builds from, the build
environment each package declares, the release check, why a build failed, in its own words."""
