"""The ground floor every other package stands on: the errors trajrl raises (``errors``), the
names of the entries it adds to TorchRL's tensordicts (``keys``), signals as exceptions
(``signals``), child processes (``processes``) and every private internal of a dependency it
reads, each with why (``internals``)."""
