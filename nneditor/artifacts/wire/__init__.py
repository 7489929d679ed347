"""Binary container formats shared by readers, walked with bounds checks and work budgets:
the protobuf wire format (:mod:`.protobuf`: ONNX, Core ML) and flatbuffers
(:mod:`.flatbuffer`: TFLite)."""
