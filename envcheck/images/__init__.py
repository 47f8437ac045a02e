"""Host side: the version matrix and the Docker SDK runner. The only package that imports `docker`."""
