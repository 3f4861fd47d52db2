// TensorFlow 1.x's ops as users' graphs hold them: the reference `runnel ops --tensorflow`
// compares the op registry with, and docs/interop.md's generated table of what is missing.
//
// The names are TensorFlow's registered op names (tf.raw_ops, TensorFlow 1.15), grouped as its
// Python modules group them. The list is the ops that graphs written by tf.layers, tf.nn,
// tf.train, tf.data, tf.estimator and the RNN cells contain — not every op TensorFlow registers
// (those also cover TPUs, XLA, collectives, debugging and test-only ops).
#include <sstream>

#include "runnel/storage/tf/tf_graph.hpp"

namespace runnel {

namespace {

struct group_text {
  const char* group;
  const char* ops; // whitespace-separated
};

const group_text groups[] = {
    {"array",
     "Const Placeholder PlaceholderWithDefault Identity IdentityN Reshape Shape ShapeN Size Rank "
     "ExpandDims Squeeze ConcatV2 Concat ConcatOffset Pack Unpack Split SplitV Slice StridedSlice "
     "StridedSliceGrad Tile Pad PadV2 MirrorPad Transpose ReverseV2 ReverseSequence Gather "
     "GatherV2 GatherNd ScatterNd Fill ZerosLike OnesLike Where OneHot BroadcastTo "
     "BroadcastArgs BroadcastGradientArgs Cast Bitcast StopGradient PreventGradient "
     "CheckNumerics Unique UniqueWithCounts SpaceToBatchND BatchToSpaceND SpaceToDepth "
     "DepthToSpace InvertPermutation MatrixBandPart MatrixDiag MatrixDiagPart MatrixSetDiag "
     "Snapshot EnsureShape ListDiff Range LinSpace TensorScatterUpdate DynamicStitch "
     "DynamicPartition ParallelDynamicStitch Empty"},
    {"math",
     "Add AddV2 AddN Sub Mul Div RealDiv FloorDiv FloorMod TruncateDiv Mod Maximum Minimum Pow "
     "SquaredDifference Neg Abs Sign Square Sqrt Rsqrt Exp Expm1 Log Log1p Reciprocal Floor Ceil "
     "Round Rint Sin Cos Tan Asin Acos Atan Atan2 Sinh Cosh Tanh Sigmoid Erf Erfc Lgamma Digamma "
     "IsNan IsInf IsFinite Equal NotEqual Less LessEqual Greater GreaterEqual LogicalAnd "
     "LogicalOr LogicalNot Select SelectV2 Sum Mean Prod Max Min All Any ArgMax ArgMin MatMul "
     "BatchMatMul BatchMatMulV2 Cumsum Cumprod SegmentSum SegmentMean UnsortedSegmentSum "
     "UnsortedSegmentMax SparseSegmentSum SparseSegmentMean SparseSegmentSqrtN ClipByValue "
     "TanhGrad SigmoidGrad RsqrtGrad SqrtGrad ReciprocalGrad DivNoNan MulNoNan ApproximateEqual "
     "Bincount Cross"},
    {"nn",
     "BiasAdd BiasAddV1 BiasAddGrad Relu Relu6 Elu Selu LeakyRelu Softplus Softsign Softmax "
     "LogSoftmax ReluGrad Relu6Grad EluGrad SoftmaxCrossEntropyWithLogits "
     "SparseSoftmaxCrossEntropyWithLogits Conv2D Conv2DBackpropInput Conv2DBackpropFilter "
     "DepthwiseConv2dNative DepthwiseConv2dNativeBackpropInput "
     "DepthwiseConv2dNativeBackpropFilter Conv3D MaxPool MaxPoolV2 AvgPool MaxPoolGrad "
     "AvgPoolGrad MaxPool3D AvgPool3D FusedBatchNorm FusedBatchNormV2 FusedBatchNormV3 "
     "FusedBatchNormGrad LRN L2Loss InTopK InTopKV2 TopKV2 Dilation2D CTCLoss CTCGreedyDecoder "
     "CTCBeamSearchDecoder NthElement"},
    {"control flow",
     "Enter Exit Switch Merge NextIteration LoopCond ControlTrigger NoOp RefSwitch RefEnter "
     "RefMerge RefExit RefIdentity Assert Print PrintV2 If StatelessIf While StatelessWhile "
     "PartitionedCall StatefulPartitionedCall"},
    {"variables",
     "VariableV2 Variable Assign AssignAdd AssignSub ScatterUpdate ScatterAdd ScatterSub "
     "ScatterMul ScatterNdUpdate ScatterNdAdd IsVariableInitialized CountUpTo VarHandleOp "
     "ReadVariableOp AssignVariableOp AssignAddVariableOp AssignSubVariableOp ResourceGather "
     "ResourceScatterAdd ResourceScatterUpdate VarIsInitializedOp"},
    {"training",
     "ApplyGradientDescent ApplyMomentum ApplyAdam ApplyAdagrad ApplyAdadelta ApplyRMSProp "
     "ApplyCenteredRMSProp ApplyFtrl ApplyFtrlV2 ApplyProximalGradientDescent ApplyAdaMax "
     "SparseApplyAdagrad SparseApplyMomentum SparseApplyFtrl ResourceApplyGradientDescent "
     "ResourceApplyAdam ResourceApplyMomentum ResourceApplyAdagrad ResourceSparseApplyAdagrad"},
    {"random", "RandomUniform RandomUniformInt RandomStandardNormal TruncatedNormal RandomShuffle "
               "Multinomial RandomGamma RandomPoisson StatelessRandomUniform StatelessRandomNormal "
               "StatelessTruncatedNormal"},
    {"tensor arrays and stacks",
     "TensorArrayV3 TensorArrayReadV3 TensorArrayWriteV3 TensorArrayGatherV3 "
     "TensorArrayScatterV3 TensorArraySizeV3 TensorArrayConcatV3 TensorArraySplitV3 "
     "TensorArrayGradV3 TensorArrayCloseV3 StackV2 StackPushV2 StackPopV2 StackCloseV2"},
    {"queues and accumulators",
     "FIFOQueueV2 RandomShuffleQueueV2 PaddingFIFOQueueV2 PriorityQueueV2 QueueEnqueueV2 "
     "QueueEnqueueManyV2 QueueDequeueV2 QueueDequeueManyV2 QueueDequeueUpToV2 QueueCloseV2 "
     "QueueSizeV2 ConditionalAccumulator AccumulatorApplyGradient AccumulatorTakeGradient "
     "AccumulatorNumAccumulated AccumulatorSetGlobalStep SparseConditionalAccumulator"},
    {"input and checkpoints",
     "TFRecordReaderV2 ReaderReadV2 ReaderReadUpToV2 WholeFileReaderV2 TextLineReaderV2 "
     "FixedLengthRecordReaderV2 ReadFile WriteFile MatchingFiles ShardedFilename "
     "ShardedFilespec SaveV2 RestoreV2 MergeV2Checkpoints Save Restore RestoreSlice SaveSlices "
     "DecodeRaw DecodeCSV ParseExample ParseSingleExample ParseSequenceExample ParseTensor "
     "SerializeTensor StringToNumber"},
    {"tf.data",
     "TensorDataset TensorSliceDataset TFRecordDataset TextLineDataset FixedLengthRecordDataset "
     "MapDataset ParallelMapDataset FilterDataset BatchDataset BatchDatasetV2 "
     "PaddedBatchDataset PaddedBatchDatasetV2 ShuffleDataset RepeatDataset PrefetchDataset "
     "TakeDataset SkipDataset ZipDataset ConcatenateDataset FlatMapDataset InterleaveDataset "
     "ParallelInterleaveDatasetV2 ShuffleAndRepeatDataset CacheDataset RangeDataset "
     "MapAndBatchDataset IteratorV2 MakeIterator IteratorGetNext OneShotIterator"},
    {"images",
     "DecodeJpeg DecodePng DecodeGif DecodeBmp EncodeJpeg EncodePng ResizeBilinear "
     "ResizeNearestNeighbor ResizeBicubic ResizeArea CropAndResize AdjustContrastv2 AdjustHue "
     "AdjustSaturation RGBToHSV HSVToRGB NonMaxSuppressionV3 ExtractImagePatches "
     "SampleDistortedBoundingBoxV2"},
    {"strings and lookup tables",
     "StringJoin StringSplit StringSplitV2 Substr StringLength StringToHashBucketFast "
     "StringToHashBucketStrong AsString RegexReplace StaticRegexReplace ReduceJoin DecodeBase64 "
     "EncodeBase64 StringStrip HashTableV2 MutableHashTableV2 LookupTableFindV2 "
     "LookupTableImportV2 LookupTableSizeV2 InitializeTableV2 InitializeTableFromTextFileV2"},
    {"sparse", "SparseTensorDenseMatMul SparseToDense SparseReshape SparseFillEmptyRows SparseAdd "
               "SparseReduceSum SparseConcat SparseTensorDenseAdd SparseSlice"},
    {"summaries",
     "ScalarSummary HistogramSummary ImageSummary AudioSummaryV2 TensorSummaryV2 MergeSummary"},
    {"rnn kernels",
     "LSTMBlockCell LSTMBlockCellGrad GRUBlockCell GRUBlockCellGrad BlockLSTM CudnnRNN "
     "CudnnRNNV3 CudnnRNNParamsToCanonical CudnnRNNCanonicalToParams"},
    {"linear algebra",
     "MatrixInverse MatrixDeterminant LogMatrixDeterminant Cholesky Qr Svd SelfAdjointEigV2 "
     "MatrixSolve MatrixTriangularSolve Einsum"},
    {"sampling", "LogUniformCandidateSampler UniformCandidateSampler FixedUnigramCandidateSampler "
                 "ComputeAccidentalHits"},
};

} // namespace

const std::vector<tf_op_group>& tensorflow_1x_ops() {
  static const std::vector<tf_op_group> all = [] {
    std::vector<tf_op_group> out;
    for (auto& g : groups) {
      tf_op_group group{g.group, {}};
      std::istringstream words(g.ops);
      for (std::string op; words >> op;)
        group.ops.push_back(op);
      out.push_back(std::move(group));
    }
    return out;
  }();
  return all;
}

} // namespace runnel
