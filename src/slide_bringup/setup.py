from glob import glob

from setuptools import find_packages, setup

package_name = 'slide_bringup'

# launch/, config/ and urdf/ live at the repository root (one place for system files);
# this package installs them into its share directory.
root = '../..'

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
        ('share/' + package_name + '/launch', sorted(glob(root + '/launch/*.py'))),
        (
            'share/' + package_name + '/config',
            sorted(
                glob(root + '/config/*.yaml')
                + glob(root + '/config/*.rviz')
                + glob(root + '/config/*.xml')
            ),
        ),
        ('share/' + package_name + '/urdf', sorted(glob(root + '/urdf/*'))),
    ],
    install_requires=['setuptools'],
    zip_safe=False,
    maintainer='Slide Robotics',
    maintainer_email='engineering@slide-robotics.com',
    description='System files of slide and the slide command line.',
    license='Apache-2.0',
    entry_points={
        'console_scripts': [
            'slide = slide_bringup.cli:main',
        ],
    },
)
