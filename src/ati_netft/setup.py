from setuptools import find_packages, setup

package_name = 'ati_netft'

setup(
    name=package_name,
    version='0.1.0',
    packages=find_packages(exclude=['test']),
    data_files=[
        ('share/ament_index/resource_index/packages', ['resource/' + package_name]),
        ('share/' + package_name, ['package.xml']),
    ],
    install_requires=['setuptools'],
    zip_safe=False,
    maintainer='Slide Robotics',
    maintainer_email='engineering@slide-robotics.com',
    description='ATI Net F/T driver, emulator and ROS 2 node.',
    license='Apache-2.0',
    entry_points={
        'console_scripts': [
            'netft_node = ati_netft.node:main',
            'netft_emulator = ati_netft.emulator:main',
        ],
    },
)
