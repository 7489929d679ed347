"""Facts of the Core ML specification (coremltools ``mlmodel/format/*.proto``) that the reader uses.

Field numbers are protobuf field numbers; names are the proto field names.
"""

from __future__ import annotations

#: Model.Type oneof: field number -> model type name.
MODEL_TYPES: dict[int, str] = {
    200: "pipelineClassifier",
    201: "pipelineRegressor",
    202: "pipeline",
    300: "glmRegressor",
    301: "supportVectorRegressor",
    302: "treeEnsembleRegressor",
    303: "neuralNetworkRegressor",
    304: "bayesianProbitRegressor",
    400: "glmClassifier",
    401: "supportVectorClassifier",
    402: "treeEnsembleClassifier",
    403: "neuralNetworkClassifier",
    404: "kNearestNeighborsClassifier",
    500: "neuralNetwork",
    501: "itemSimilarityRecommender",
    502: "mlProgram",
    555: "customModel",
    556: "linkedModel",
    560: "classConfidenceThresholding",
    600: "oneHotEncoder",
    601: "imputer",
    602: "featureVectorizer",
    603: "dictVectorizer",
    604: "scaler",
    606: "categoricalMapping",
    607: "normalizer",
    609: "arrayFeatureExtractor",
    610: "nonMaximumSuppression",
    900: "identity",
    2000: "textClassifier",
    2001: "wordTagger",
    2002: "visionFeaturePrint",
    2003: "soundAnalysisPreprocessing",
    2004: "gazetteer",
    2005: "wordEmbedding",
    2006: "audioFeaturePrint",
    3000: "serializedModel",
}

#: Model types whose message is a NeuralNetwork (layers = field 1).
NEURAL_NETWORK_TYPES = {500, 403, 303}
PIPELINE_TYPES = {200, 201, 202}
ML_PROGRAM = 502

#: NeuralNetworkLayer.layer oneof: field number -> layer type.
LAYER_TYPES: dict[int, str] = {
    100: "convolution",
    120: "pooling",
    130: "activation",
    140: "innerProduct",
    150: "embedding",
    160: "batchnorm",
    165: "mvn",
    170: "l2normalize",
    175: "softmax",
    180: "lrn",
    190: "crop",
    200: "padding",
    210: "upsample",
    211: "resizeBilinear",
    212: "cropResize",
    220: "unary",
    230: "add",
    231: "multiply",
    240: "average",
    245: "scale",
    250: "bias",
    260: "max",
    261: "min",
    270: "dot",
    280: "reduce",
    290: "loadConstant",
    300: "reshape",
    301: "flatten",
    310: "permute",
    320: "concat",
    330: "split",
    340: "sequenceRepeat",
    345: "reorganizeData",
    350: "slice",
    400: "simpleRecurrent",
    410: "gru",
    420: "uniDirectionalLSTM",
    430: "biDirectionalLSTM",
    500: "custom",
    600: "copy",
    605: "branch",
    615: "loop",
    620: "loopBreak",
    625: "loopContinue",
    635: "rangeStatic",
    640: "rangeDynamic",
    660: "clip",
    665: "ceil",
    670: "floor",
    680: "sign",
    685: "round",
    700: "exp2",
    710: "sin",
    715: "cos",
    720: "tan",
    730: "asin",
    735: "acos",
    740: "atan",
    750: "sinh",
    755: "cosh",
    760: "tanh",
    770: "asinh",
    775: "acosh",
    780: "atanh",
    790: "erf",
    795: "gelu",
    815: "equal",
    820: "notEqual",
    825: "lessThan",
    827: "lessEqual",
    830: "greaterThan",
    832: "greaterEqual",
    840: "logicalOr",
    845: "logicalXor",
    850: "logicalNot",
    855: "logicalAnd",
    865: "modBroadcastable",
    870: "minBroadcastable",
    875: "maxBroadcastable",
    880: "addBroadcastable",
    885: "powBroadcastable",
    890: "divideBroadcastable",
    895: "floorDivBroadcastable",
    900: "multiplyBroadcastable",
    905: "subtractBroadcastable",
    920: "tile",
    925: "stack",
    930: "gather",
    935: "scatter",
    940: "gatherND",
    945: "scatterND",
    950: "softmaxND",
    952: "gatherAlongAxis",
    954: "scatterAlongAxis",
    960: "reverse",
    965: "reverseSeq",
    975: "splitND",
    980: "concatND",
    985: "transpose",
    995: "sliceStatic",
    1000: "sliceDynamic",
    1005: "slidingWindows",
    1015: "topK",
    1020: "argMin",
    1025: "argMax",
    1040: "embeddingND",
    1045: "batchedMatmul",
    1065: "getShape",
    1070: "loadConstantND",
    1080: "fillLike",
    1085: "fillStatic",
    1090: "fillDynamic",
    1100: "broadcastToLike",
    1105: "broadcastToStatic",
    1110: "broadcastToDynamic",
    1120: "squeeze",
    1125: "expandDims",
    1130: "flattenTo2D",
    1135: "reshapeLike",
    1140: "reshapeStatic",
    1145: "reshapeDynamic",
    1150: "rankPreservingReshape",
    1155: "constantPad",
    1170: "randomNormalLike",
    1175: "randomNormalStatic",
    1180: "randomNormalDynamic",
    1190: "randomUniformLike",
    1195: "randomUniformStatic",
    1200: "randomUniformDynamic",
    1210: "randomBernoulliLike",
    1215: "randomBernoulliStatic",
    1220: "randomBernoulliDynamic",
    1230: "categoricalDistribution",
    1250: "reduceL1",
    1255: "reduceL2",
    1260: "reduceMax",
    1265: "reduceMin",
    1270: "reduceSum",
    1275: "reduceProd",
    1280: "reduceMean",
    1285: "reduceLogSum",
    1290: "reduceSumSquare",
    1295: "reduceLogSumExp",
    1313: "whereNonZero",
    1315: "matrixBandPart",
    1320: "lowerTriangular",
    1325: "upperTriangular",
    1330: "whereBroadcastable",
    1350: "layerNormalization",
    1400: "NonMaximumSuppression",
    1450: "oneHot",
    1455: "cumSum",
    1460: "clampedReLU",
    1461: "argSort",
    1465: "pooling3d",
    1466: "globalPooling3d",
    1470: "sliceBySize",
    1471: "convolution3d",
}

#: Layer type field -> {WeightParams field: parameter name}. Nested messages are (field, {...}).
LAYER_WEIGHTS: dict[int, dict[int, str]] = {
    100: {90: "weights", 91: "bias"},  # convolution
    140: {20: "weights", 21: "bias"},  # innerProduct
    150: {20: "weights", 21: "bias"},  # embedding
    160: {15: "gamma", 16: "beta", 17: "mean", 18: "variance"},  # batchnorm
    245: {2: "scale", 5: "bias"},  # scale
    250: {2: "bias"},  # bias
    290: {2: "data"},  # loadConstant
    400: {30: "weightMatrix", 31: "recursionMatrix", 32: "biasVector"},  # simpleRecurrent
    410: {
        30: "updateGateWeightMatrix",
        31: "resetGateWeightMatrix",
        32: "outputGateWeightMatrix",
        50: "updateGateRecursionMatrix",
        51: "resetGateRecursionMatrix",
        52: "outputGateRecursionMatrix",
        70: "updateGateBiasVector",
        71: "resetGateBiasVector",
        72: "outputGateBiasVector",
    },  # gru
    500: {20: "weights"},  # custom (repeated)
    1040: {20: "weights", 21: "bias"},  # embeddingND
    1045: {8: "weights", 9: "bias"},  # batchedMatmul
    1070: {2: "data"},  # loadConstantND
    1350: {3: "gamma", 4: "beta"},  # layerNormalization
    1471: {60: "weights", 61: "bias"},  # convolution3d
}
#: Layers whose weights sit one message deeper: layer field -> (sub-message field, weights).
LSTM_WEIGHTS = {
    1: "inputGateWeightMatrix",
    2: "forgetGateWeightMatrix",
    3: "blockInputWeightMatrix",
    4: "outputGateWeightMatrix",
    20: "inputGateRecursionMatrix",
    21: "forgetGateRecursionMatrix",
    22: "blockInputRecursionMatrix",
    23: "outputGateRecursionMatrix",
    40: "inputGateBiasVector",
    41: "forgetGateBiasVector",
    42: "blockInputBiasVector",
    43: "outputGateBiasVector",
    60: "inputGatePeepholeVector",
    61: "forgetGatePeepholeVector",
    62: "outputGatePeepholeVector",
}
NESTED_WEIGHTS: dict[int, tuple[int, dict[int, str]]] = {
    420: (20, LSTM_WEIGHTS),  # uniDirectionalLSTM.weightParams
    430: (20, LSTM_WEIGHTS),  # biDirectionalLSTM.weightParams (repeated: forward, backward)
    130: (25, {1: "alpha"}),  # activation.PReLU
}

#: ArrayFeatureType.ArrayDataType -> dtype.
ARRAY_DTYPES = {
    65568: "float32",
    65600: "float64",
    131104: "int32",
    131080: "int8",
    65552: "float16",
}
#: ImageFeatureType.ColorSpace -> name.
COLOR_SPACES = {10: "GRAYSCALE", 20: "RGB", 30: "BGR", 40: "GRAYSCALE_FLOAT16"}

#: MILSpec.DataType -> dtype (None: no NNEditor dtype).
MIL_DTYPES: dict[int, str | None] = {
    1: "bool",
    2: "string",
    10: "float16",
    11: "float32",
    12: "float64",
    13: "bfloat16",
    21: "int8",
    22: "int16",
    23: "int32",
    24: "int64",
    25: "int4",
    31: "uint8",
    32: "uint16",
    33: "uint32",
    34: "uint64",
    35: "uint4",
    36: "uint2",
    37: None,  # UINT1
    38: None,  # UINT6
    39: None,  # UINT3
    40: "float8_e4m3fn",
    41: "float8_e5m2",
}

#: MILBlob BlobDataType -> (dtype or None, bits per element).
BLOB_DTYPES: dict[int, tuple[str | None, int]] = {
    1: ("float16", 16),
    2: ("float32", 32),
    3: ("uint8", 8),
    4: ("int8", 8),
    5: ("bfloat16", 16),
    6: ("int16", 16),
    7: ("uint16", 16),
    8: ("int4", 4),
    9: (None, 1),  # UInt1
    10: ("uint2", 2),
    11: ("uint4", 4),
    12: (None, 3),  # UInt3
    13: (None, 6),  # UInt6
    14: ("int32", 32),
    15: ("uint32", 32),
    16: ("float8_e4m3fn", 8),
    17: ("float8_e5m2", 8),
}
BLOB_SENTINEL = 0xDEADBEEF
BLOB_HEADER_BYTES = 64
BLOB_METADATA_BYTES = 64
