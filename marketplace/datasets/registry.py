"""The public datasets the shipped scenarios use, each declared once.

A :class:`DatasetSpec` says where a dataset comes from (publisher page, OpenML id where one
exists), under which licence, how to cite it, and which files make it up. Every file carries its
size and SHA-256, so a copy fetched from any server (the upstream one or a mirror) is checked
before it is kept or used.

The cache (and any mirror) is laid out as ``NAME/FILE``: the dataset's name is its folder and the
file names are the ones below. Each :class:`FileSpec` has the upstream URL that serves exactly
those bytes, where one exists (raw files at a pinned commit of the repository the copy came from,
or the UCI archive); a file no server publishes as it is stored (Bank Marketing's recompressed CSV)
has none, and its ``recipe`` says how to make it.
"""

from __future__ import annotations

from dataclasses import dataclass

GITHUB = "https://raw.githubusercontent.com"
UCI_ADULT = "https://archive.ics.uci.edu/ml/machine-learning-databases/adult"


@dataclass(frozen=True)
class FileSpec:
    """One file of a dataset: its name inside the dataset folder, size in bytes and SHA-256."""

    name: str
    size: int
    sha256: str
    url: str | None = None
    """Where upstream serves exactly these bytes; None when no server does (see ``recipe``)."""
    recipe: str = ""
    """How to make the file from upstream material when ``url`` is None."""


@dataclass(frozen=True)
class DatasetSpec:
    """A public dataset: provenance, licence, citation and files (see the module docstring)."""

    name: str
    title: str
    origin: str
    """The publisher's page for the dataset."""
    license: str
    citation: str
    files: tuple[FileSpec, ...]
    openml: int | None = None
    """The OpenML id of the same data (a reference; the files here are the publisher's own format)."""
    uci: int | None = None
    """The UCI Machine Learning Repository id."""
    copy: str = ""
    """Where the registered copy of the files was taken from, and what (if anything) was changed."""
    used_by: str = ""
    """The scenario source kinds that read it."""

    @property
    def size(self) -> int:
        """Total bytes of the dataset's files."""
        return sum(f.size for f in self.files)

    def file(self, name: str) -> FileSpec:
        """The spec of the file ``name``; KeyError naming the dataset's files otherwise."""
        for spec in self.files:
            if spec.name == name:
                return spec
        raise KeyError(f"dataset {self.name!r} has no file {name!r}; its files: {[f.name for f in self.files]}")


def _github(repo: str, commit: str, path: str) -> str:
    return f"{GITHUB}/{repo}/{commit}/{path}"


_OCCUPANCY = ("LuisM78/Occupancy-detection-data", "ba2b1d7b53a71292ff61b867d3e16f0e539c7eb6")
_OFFICE = ("ZhangJUJU/OfficeCaltechDomainAdaptation", "01532fd8d1c7140f4836f6877fac8f80fd0bebfa")
_MNIST = ("kelas/mnist", "283b387221ab46655e600cfcc25d843bb14292b9")
_SUPERCONDUCT = "baris-yazici/ST310-ML-Final-Project"

DATASETS: dict[str, DatasetSpec] = {
    spec.name: spec
    for spec in (
        DatasetSpec(
            name="adult",
            title="Adult (Census Income)",
            origin="https://archive.ics.uci.edu/dataset/2/adult",
            openml=1590,
            uci=2,
            license="CC BY 4.0",
            citation="Ron Kohavi. Scaling Up the Accuracy of Naive-Bayes Classifiers: a Decision-Tree Hybrid. "
            "Proceedings of the 2nd International Conference on Knowledge Discovery and Data Mining (KDD), 1996.",
            copy="the UCI files, byte for byte (adult.names via github.com/advaithca/lessThanGreaterThan50k)",
            used_by="adult, table (dataset: adult)",
            files=(
                FileSpec(
                    "adult.data",
                    3_974_305,
                    "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d",
                    f"{UCI_ADULT}/adult.data",
                ),
                FileSpec(
                    "adult.test",
                    2_003_153,
                    "a2a9044bc167a35b2361efbabec64e89d69ce82d9790d2980119aac5fd7e9c05",
                    f"{UCI_ADULT}/adult.test",
                ),
                FileSpec(
                    "adult.names",
                    5_229,
                    "c248284c0b5de30c9e1958d6cdd168a34a654758b620e68f46aefa83fc0a576a",
                    _github(
                        "advaithca/lessThanGreaterThan50k", "e91f4a9036bba2042c17da9d8e75b22cea4d9b7c", "adult.names"
                    ),
                ),
            ),
        ),
        DatasetSpec(
            name="bank_marketing",
            title="Bank Marketing (bank-full)",
            origin="https://archive.ics.uci.edu/dataset/222/bank+marketing",
            openml=1461,
            uci=222,
            license="CC BY 4.0",
            citation="Sérgio Moro, Paulo Cortez, Paulo Rita. A Data-Driven Approach to Predict the Success of Bank "
            "Telemarketing. Decision Support Systems 62, 22-31, 2014.",
            copy="bank-full.csv from the UCI archive, compressed with `gzip -9 -n` (GNU gzip)",
            used_by="table (dataset: bank)",
            files=(
                FileSpec(
                    "bank-full.csv.gz",
                    475_023,
                    "a33820520e31d26b498e31003e99eb0e477690b699a38eade375acf3b3004dcd",
                    recipe="download https://archive.ics.uci.edu/static/public/222/bank+marketing.zip, take "
                    "bank-full.csv out of the bank.zip inside it (4,610,348 bytes, SHA-256 d1513ec63b385506f7cf"
                    "ce9f2c5caa9fe99e7ba4e8c3fa264b3aaf0f849ed32d) and compress it with GNU `gzip -9 -n`",
                ),
            ),
        ),
        DatasetSpec(
            name="bike_sharing",
            title="Bike Sharing, hourly",
            origin="https://archive.ics.uci.edu/dataset/275/bike+sharing+dataset",
            uci=275,
            license="CC BY 4.0",
            citation="Hadi Fanaee-T, João Gama. Event labeling combining ensemble detectors and background knowledge. "
            "Progress in Artificial Intelligence 2, 113-127, 2014.",
            copy="hour.csv as published by UCI (copy at github.com/heba14101998/Bike-Sharing-Project)",
            used_by="table (dataset: bike)",
            files=(
                FileSpec(
                    "hour.csv",
                    1_156_736,
                    "e03de4ee4ef4dc376ac6e04bf829673c6269e8eba5c60fa121640fa2f829504f",
                    _github(
                        "heba14101998/Bike-Sharing-Project",
                        "98f2cc0427b09606c416bc8043644ad234f0a553",
                        "Bike-Sharing-Dataset/hour.csv",
                    ),
                ),
            ),
        ),
        DatasetSpec(
            name="diabetic_retinopathy_debrecen",
            title="Diabetic Retinopathy Debrecen (Messidor features)",
            origin="https://archive.ics.uci.edu/dataset/329/diabetic+retinopathy+debrecen",
            uci=329,
            license="CC BY 4.0",
            citation="Bálint Antal, András Hajdu. An ensemble-based system for automatic screening of diabetic "
            "retinopathy. Knowledge-Based Systems 60, 20-27, 2014.",
            copy=(
                "messidor_features.arff as published by UCI (copy at "
                "github.com/pxpepe/ml-diabetic-retinopathy-debrecen)"
            ),
            used_by="table (dataset: diabetes)",
            files=(
                FileSpec(
                    "messidor_features.arff",
                    117_223,
                    "f26adef0a94920205da4eedefbb6ccd730fd4b52a18ac7c01457cc7c1382c0c4",
                    _github(
                        "pxpepe/ml-diabetic-retinopathy-debrecen",
                        "7ab2658e48d40ec5d9772f5c59ac330868383c35",
                        "messidor_features.arff",
                    ),
                ),
            ),
        ),
        DatasetSpec(
            name="lifesci_ds1.10",
            title="LifeSci (ds1 projected to 10 principal components)",
            origin="http://komarix.org/ac/ds",
            license="not stated by the publisher (research data set)",
            citation="Paul Komarek. Logistic Regression for Data Mining and High-Dimensional Classification. "
            "PhD thesis, Carnegie Mellon University, 2004.",
            copy="ds1.10.csv.bz2 from github.com/niloyb/BoundWasserstein (bayesian_logistic_regression/)",
            used_by="lifesci",
            files=(
                FileSpec(
                    "ds1.10.csv.bz2",
                    719_708,
                    "263da7746e306a2cf78a8606c9082fd455be9240e4ef5528e2e78e3e69f63d86",
                    _github(
                        "niloyb/BoundWasserstein",
                        "2eeb626f005155c5b0b2af89f84b6b7606d47fa1",
                        "bayesian_logistic_regression/ds1.10.csv.bz2",
                    ),
                ),
            ),
        ),
        DatasetSpec(
            name="mnist",
            title="MNIST, the 10,000 test images",
            origin="http://yann.lecun.com/exdb/mnist/",
            openml=554,
            license="CC BY-SA 3.0 (as commonly given)",
            citation=(
                "Yann LeCun, Corinna Cortes, Christopher J. C. Burges. The MNIST database of handwritten digits, 1998."
            ),
            copy="the original IDX files (copy at github.com/kelas/mnist)",
            used_by="mnist",
            files=tuple(
                FileSpec(name, size, sha, _github(*_MNIST, name))
                for name, size, sha in (
                    (
                        "t10k-images-idx3-ubyte.gz",
                        1_648_877,
                        "167310007f03058885c7e95e6c0b19c20de5c7fd3031f4cbdadc9014a523d80b",
                    ),
                    (
                        "t10k-labels-idx1-ubyte.gz",
                        4_542,
                        "fc607395669ec21321ea83e4b82c0544b7e8e63ff5b34337c06bc0a17cc0da3c",
                    ),
                )
            ),
        ),
        DatasetSpec(
            name="occupancy",
            title="Occupancy Detection",
            origin="https://archive.ics.uci.edu/dataset/357/occupancy+detection",
            uci=357,
            license="CC BY 4.0 (UCI)",
            citation="Luis M. Candanedo, Véronique Feldheim. Accurate occupancy detection of an office room from "
            "light, "
            "temperature, humidity and CO2 measurements using statistical learning models. "
            "Energy and Buildings 112, 28-39, 2016.",
            copy="the first author's repository github.com/LuisM78/Occupancy-detection-data",
            used_by="occupancy",
            files=tuple(
                FileSpec(name, size, sha, _github(*_OCCUPANCY, name))
                for name, size, sha in (
                    ("datatraining.txt", 596_674, "b2c4d0ce2b9e4e453c476f7125ef31aeec2d1f5c7f5572d0e80de3df6521ab56"),
                    ("datatest.txt", 200_766, "1b92c7c1b2838963464fa891a610cf3c5db4becb7189189b29b330107a584c7f"),
                    ("datatest2.txt", 699_664, "d026d1bd5aeccd4aff4f3b3710d48e40613bd5fc370db7e61bbdcaa50d985095"),
                )
            ),
        ),
        DatasetSpec(
            name="office_caltech10_features",
            title="Office-Caltech10 image features (SURF 800-d, GoogLeNet 1024-d)",
            origin="https://github.com/ZhangJUJU/OfficeCaltechDomainAdaptation",
            license="not stated (research data set)",
            citation="Kate Saenko, Brian Kulis, Mario Fritz, Trevor Darrell. Adapting Visual Category Models to New "
            "Domains. ECCV 2010; Boqing Gong, Yuan Shi, Fei Sha, Kristen Grauman. Geodesic Flow Kernel for "
            "Unsupervised Domain Adaptation. CVPR 2012; Gregory Griffin, Alex Holub, Pietro Perona. "
            "Caltech-256 Object Category Dataset. Caltech technical report, 2007.",
            copy="features/surf and features/GoogleNet1024 of github.com/ZhangJUJU/OfficeCaltechDomainAdaptation "
            "(GoogLeNet has no caltech10 file)",
            used_by="office_caltech",
            files=tuple(
                FileSpec(name, size, sha, _github(*_OFFICE, upstream))
                for name, upstream, size, sha in (
                    (
                        "surf/amazon.mat",
                        "features/surf/amazon.mat",
                        104_970,
                        "df32548b994e18d364c99e1f317e1fae100597259f0423a41b90f4f68187bb1f",
                    ),
                    (
                        "surf/webcam.mat",
                        "features/surf/webcam.mat",
                        32_406,
                        "a6a9c78b4b7181dfbb58bcfd351d4ebd737f171c31247b8884948aa156d3f700",
                    ),
                    (
                        "surf/dslr.mat",
                        "features/surf/dslr.mat",
                        18_348,
                        "44d673c68e1d07b837893aa74dba3b986e4a6cc3fd66f0dd357683bdef059216",
                    ),
                    (
                        "surf/caltech10.mat",
                        "features/surf/caltech10.mat",
                        150_751,
                        "4f9334c8ced489d5054de97a5fd51a61f017f3bcd1f38c9a85c6d78cb9d7bda5",
                    ),
                    (
                        "googlenet1024/amazon.mat",
                        "features/GoogleNet1024/amazon.mat",
                        3_931_880,
                        "bae9ee6e8f7ca305120dd970f2c90471f4ef8dda4cb2ad2404c38bb26cb56ba9",
                    ),
                    (
                        "googlenet1024/webcam.mat",
                        "features/GoogleNet1024/webcam.mat",
                        1_210_928,
                        "57774bbdf97433b5fb5a6333e302f077444c069537138b60ef417f48ee65d296",
                    ),
                    (
                        "googlenet1024/dslr.mat",
                        "features/GoogleNet1024/dslr.mat",
                        644_576,
                        "5f7c6211581f846b7b5534429fb62bfb7e490e88aacfc8bee97eb0b0224dbd89",
                    ),
                )
            ),
        ),
        DatasetSpec(
            name="superconductivity_subsample",
            title="Superconductivity, two random subsamples (1,000 and 500 rows)",
            origin="https://archive.ics.uci.edu/dataset/464/superconductivty+data",
            uci=464,
            license="CC BY 4.0",
            citation="Kam Hamidieh. A data-driven statistical model for predicting the critical temperature of a "
            "superconductor. Computational Materials Science 154, 346-354, 2018.",
            copy="two independent dplyr::sample_n draws of the UCI train.csv "
            "(github.com/baris-yazici/ST310-ML-Final-Project, "
            "data/subsampled_superconduct.csv at two commits)",
            used_by="superconductivity",
            files=(
                FileSpec(
                    "subsampled_superconduct_n1000.csv",
                    1_129_888,
                    "7485b0137883769595e88166fad909ebe73350cd6ad020c96581a6c6d9fc87a2",
                    _github(
                        _SUPERCONDUCT, "564b3243498b83c2047a65c0913803b079fc58f2", "data/subsampled_superconduct.csv"
                    ),
                ),
                FileSpec(
                    "subsampled_superconduct_n500.csv",
                    556_769,
                    "5b78d6602dcca8ab41b2ced0bf0552d28d4cf1ac08a5da09a5e528a45eb8c7c9",
                    _github(
                        _SUPERCONDUCT, "81d7b2ab927d7ce86f39ff9c223ec0a9728cc2df", "data/subsampled_superconduct.csv"
                    ),
                ),
            ),
        ),
    )
}


class UnknownDataset(KeyError):
    """A dataset name the registry does not know; the message lists the known ones."""

    def __str__(self) -> str:
        return str(self.args[0])


def dataset(name: str) -> DatasetSpec:
    """The registered dataset ``name``; :class:`UnknownDataset` listing the known names otherwise."""
    try:
        return DATASETS[name]
    except KeyError:
        raise UnknownDataset(f"unknown dataset {name!r}; the registry has {', '.join(DATASETS)}") from None
