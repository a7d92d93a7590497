"""The gfal2 engine: copies (and checksum requests) made by gfal2 in the driving worker's copy
threads or on a client pool's hosts. Its app (`apps.Gfal2Config`) registers it and the
storage library when ready."""
