"""aiogroup's tooling, apart from the library (which never imports it):

* :mod:`aiogroup.tools.cli`: the ``aiogroup`` command (``python -m aiogroup``);
* :mod:`aiogroup.tools.group`: ``aiogroup group describe|watch`` over :mod:`aiogroup.inspector`;
* :mod:`aiogroup.tools.demo`: ``aiogroup demo``;
* :mod:`aiogroup.tools.audit`: the ownership audit on Apache Spark (``aiogroup analyze``);
* :mod:`aiogroup.tools.chaos`: the chaos suite (``python -m aiogroup.tools.chaos``), with
  members of other clients (librdkafka, kafka-python, Java, franz-go) imported only when used.
"""
