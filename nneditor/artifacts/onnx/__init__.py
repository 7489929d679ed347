"""The lazy ONNX reader.

``reader.open_document(path)`` indexes a model's protobuf wire format without ``onnx.load``:
initializer bytes stay ranges in the memory-mapped file (or in external data files next to it),
nodes are parsed with onnx's own protobuf classes in one batch, and subgraphs and local
functions become nested :class:`~nneditor.model.graph.Graph` objects.

Modules: ``wire_index`` (tags and lengths), ``tensor_index`` (TensorProto fields),
``typed_decode`` (typed value fields), ``tensors`` (TensorRef + loaders), ``external``
(external data), ``attributes`` (node attributes), ``objects`` (lazy Node/Graph flavours),
``fast_constant`` (the common Constant node), ``graph_build`` (graphs, subgraphs, functions),
``reader`` (the model and the Document).
"""
